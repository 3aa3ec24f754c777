// Compound requests (FUSE_COMPOUND, opcode 101 of the stripefs fuse.ko
// series and DDN's redfs): several whole requests sent as one, answered by
// one reply that carries every sub-reply. The kernel sends OPEN+GETATTR this
// way once the server set FUSE_HAS_COMPOUND in its INIT reply.
//
// Wire layout (fuse_abi.h): fuse_compound_in, then `count` sub-requests back
// to back, each a fuse_in_header whose len covers its own arguments. The
// reply body is fuse_compound_out, then per sub-request in order a
// fuse_out_header (len = 16 + payload, error = 0 or -errno, the sub-request's
// unique) and its payload.
//
// DecodeCompound() checks every length against the bytes that arrived
// (count 1..FUSE_MAX_COMPOUND_OPS, sub-request lengths summing exactly to
// the body) and which opcodes may be inside: one the engine answers exactly
// once through a normal handler. INIT, DESTROY, INTERRUPT, FORGET,
// BATCH_FORGET, NOTIFY_REPLY and a nested COMPOUND are refused. Every
// refusal is EINVAL with a reason; nothing reads past a span.
//
// RunCompound() serves the decoded sub-requests through a dispatch function
// (the Session's normal handlers) and answers the compound once the last
// sub-reply arrived, from whichever thread gave it. Sub-requests are served
// in order of dispatch but may complete in any order; the reply keeps the
// request order.
//
// Ownership: the decoded spans point into the compound's request buffer,
// valid until the compound is answered, which happens only after every
// sub-request was answered. RunCompound owns its state and frees it after
// the reply. Decode/encode are stateless: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fuse/fuse_abi.h"
#include "fuse/replier.h"
#include "fuse/request_parser.h"

namespace stripefs::fuse {

// One sub-request as SplitDevBuffer() sees it: header + fixed args + rest.
using CompoundSubRequest = RawRequest;

struct CompoundDecode {
  int error = 0;       // 0 or EINVAL
  std::string reason;  // what was wrong, for the log line
  fuse_abi::fuse_compound_in in{};
  std::vector<CompoundSubRequest> subs;
};

// `arg0`: the fuse_compound_in bytes; `rest`: the sub-requests.
CompoundDecode DecodeCompound(std::span<const uint8_t> arg0,
                              std::span<const uint8_t> rest,
                              const ParseOptions& opts);

// True if `opcode` may travel inside a compound (see the header comment).
bool AllowedInCompound(uint32_t opcode);

struct CompoundSubReply {
  uint64_t unique = 0;  // the sub-request's, echoed
  int error = 0;        // positive errno or 0
  std::vector<uint8_t> payload;
};

// The reply body: fuse_compound_out followed by each sub-reply.
std::vector<uint8_t> EncodeCompoundReply(
    std::span<const CompoundSubReply> subs);

// Serves `d.subs` through `dispatch(sub_inflight, sub)`, which must make the
// InFlight complete exactly once (now or later, any thread); `base` is the
// compound's context (queue, cpu, transport) that the sub-requests inherit.
// Answers `parent` with EncodeCompoundReply() when all have completed.
using CompoundDispatch =
    std::function<void(InFlight* sub, const CompoundSubRequest& req)>;
void RunCompound(Replier parent, const RequestContext& base,
                 CompoundDecode d, const CompoundDispatch& dispatch);

}  // namespace stripefs::fuse
