// The opcode table: one row per FUSE opcode with everything the engine knows
// about it (the model is go-fuse's fuse/opcode.go).
//
// A row holds the opcode's name, the layout of its request (fixed argument
// struct size from fuse_abi.h, what follows it, so also how many names it
// carries), whether the kernel waits for a reply, whether it may arrive
// before INIT, and the handler that serves it. The parser reads the layout
// columns, the Session calls the handler; no other code keeps a list of
// opcodes (the Session only peeks at WRITE to count writeback separately).
// Adding an opcode = one row in opcode_table.cc plus its handler there.
//
// Handlers get an OpCall: the parsed request, the file system, and the few
// engine services a handler may need (OpEngine, implemented by the Session).
// The table is constant: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuse/fuse_abi.h"
#include "fuse/replier.h"
#include "fuse/transport.h"

namespace stripefs::fuse {

class RawFileSystem;
struct ParsedRequest;

// What follows the fixed argument struct.
enum class Tail : uint8_t {
  kNone,       // nothing
  kName,       // one NUL-terminated name
  kTwoNames,   // two NUL-terminated names
  kNameValue,  // name + value bytes (SETXATTR; value size in the struct)
  kData,       // raw bytes, exactly fuse_write_in.size (WRITE)
  kForgets,    // fuse_batch_forget_in.count * fuse_forget_one
  kAny,        // opaque bytes (IOCTL, NOTIFY_REPLY)
};

// Names carried by a tail (0, 1 or 2).
constexpr int NameCount(Tail t) {
  return t == Tail::kName || t == Tail::kNameValue ? 1
         : t == Tail::kTwoNames                    ? 2
                                                   : 0;
}

enum class ReplyRule : uint8_t {
  kAlways,      // the kernel waits for exactly one reply
  kNever,       // FORGET, BATCH_FORGET: never answered
  kOnlyEagain,  // INTERRUPT: answered only with EAGAIN (target not seen)
};

// Engine services a handler may use; implemented by the Session.
class OpEngine {
 public:
  // Registers the request (INTERRUPT can find it) and hands out its Replier.
  virtual Replier Track(InFlight* inflight) = 0;
  virtual void Init(InFlight* inflight, const ParsedRequest& q) = 0;
  virtual void Interrupt(InFlight* inflight, uint64_t target) = 0;
  virtual void Destroy(InFlight* inflight) = 0;
  // FUSE_COMPOUND: decodes the sub-requests and serves each through its
  // row's handler (fuse/compound.h); answers ENOSYS when refused by option.
  virtual void Compound(InFlight* inflight, const ParsedRequest& q) = 0;

 protected:
  ~OpEngine() = default;
};

// One request being served.
struct OpCall {
  const ParsedRequest& q;
  RawFileSystem& fs;
  OpEngine& engine;
  InFlight* inflight;

  uint64_t node() const;
  Replier Reply() const { return engine.Track(inflight); }
  void NoReply() const { inflight->Complete(kNoReply, {}); }
};

using OpHandler = void (*)(const OpCall& call);

struct OpcodeRow {
  uint32_t opcode = 0;
  std::string_view name;  // "" = not a row
  size_t fixed = 0;       // fixed argument struct bytes
  size_t fixed_ext = 0;   // with FUSE_SETXATTR_EXT (0: as fixed)
  size_t min_fixed = 0;   // shorter accepted (INIT from old kernels)
  Tail tail = Tail::kNone;
  ReplyRule reply = ReplyRule::kAlways;
  bool before_init = false;     // may arrive before INIT was answered
  OpHandler handler = nullptr;  // nullptr: known but not parsed (ENOSYS)
};

// The row of `opcode`, or nullptr for an opcode we do not know.
const OpcodeRow* FindOpcode(uint32_t opcode);

// Human name of an opcode ("LOOKUP", "WRITE", ... or "UNKNOWN").
std::string_view OpcodeName(uint32_t opcode);

// True for opcodes the kernel expects no reply to (FORGET, BATCH_FORGET).
bool IsNoReplyOpcode(uint32_t opcode);

}  // namespace stripefs::fuse
