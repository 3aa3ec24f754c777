// Request parser: turns raw FUSE request bytes into a typed, validated view.
//
// Input comes in two shapes and both end up in ParseRequest():
//   * /dev/fuse: one contiguous buffer (header, fixed arg struct, rest);
//     SplitDevBuffer() checks the header and splits it.
//   * io-uring: header and fixed arg struct in the 288-byte ring header, the
//     rest (names, WRITE data) in the payload buffer.
// Layouts come from the opcode table (opcode_table.h).
// Every length is checked against the opcode's struct sizes and every name
// must be NUL-terminated inside the buffer; nothing reads past a span.
// Unknown opcodes give ENOSYS, malformed requests EINVAL with a reason.
//
// ParsedRequest does not own the bytes: `name`, `name2` and `data` point into
// the caller's buffer and are valid as long as that buffer is. The fixed arg
// struct is copied (<= 128 bytes), so In<T>() needs no alignment.
// Stateless functions: thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fuse/fuse_abi.h"
#include "fuse/opcode_table.h"

namespace stripefs::fuse {

// Per-connection facts that change argument sizes.
struct ParseOptions {
  bool setxattr_ext = false;  // FUSE_SETXATTR_EXT negotiated: 16-byte struct
};

struct ParsedRequest {
  fuse_abi::fuse_in_header header{};
  uint32_t opcode = 0;
  // Copy of the opcode's fixed argument struct (in_size bytes, zero padded).
  alignas(8) uint8_t in[fuse_abi::FUSE_URING_OP_IN_OUT_SZ] = {};
  uint32_t in_size = 0;
  // First and second NUL-terminated strings (without the NUL), if the
  // opcode carries them (LOOKUP name, RENAME old/new, SYMLINK name/target).
  std::string_view name;
  std::string_view name2;
  // Trailing bytes: WRITE data, SETXATTR value, BATCH_FORGET entries
  // (count * fuse_forget_one), IOCTL/NOTIFY_REPLY data.
  std::span<const uint8_t> data;

  // The fixed argument struct as T. The parser guarantees in_size ==
  // sizeof(T) for the opcode's struct (except INIT: >= 16, zero padded).
  template <typename T>
  T In() const {
    static_assert(sizeof(T) <= sizeof(in));
    T t;
    std::memcpy(&t, in, sizeof(T));
    return t;
  }
  // BATCH_FORGET entry i (i < count), copied (data may be unaligned).
  fuse_abi::fuse_forget_one ForgetEntry(size_t i) const;
};

struct ParseResult {
  int error = 0;       // 0, ENOSYS (unknown opcode) or EINVAL (malformed)
  std::string reason;  // what was wrong, for the log line
  ParsedRequest req;
};

// Size of the fixed argument struct of `opcode` (0 for name-only or no-arg
// opcodes), or nullopt when we do not know the opcode.
std::optional<size_t> FixedArgSize(uint32_t opcode, const ParseOptions& opts);

// A /dev/fuse buffer split into header + fixed args + rest.
struct RawRequest {
  fuse_abi::fuse_in_header header{};
  std::span<const uint8_t> arg0;  // the fixed arg struct bytes
  std::span<const uint8_t> rest;  // everything after it (minus extensions)
};

// Validates the header of a buffer read from /dev/fuse (size >= header,
// header.len == buffer size, extensions fit) and splits it. On error
// returns EINVAL and a reason in `reason`; `unique` is set when readable.
struct SplitResult {
  int error = 0;
  std::string reason;
  RawRequest raw;
};
SplitResult SplitDevBuffer(std::span<const uint8_t> buf,
                           const ParseOptions& opts);

// Validates arguments of one request and builds the typed view.
ParseResult ParseRequest(const fuse_abi::fuse_in_header& header,
                         std::span<const uint8_t> arg0,
                         std::span<const uint8_t> rest,
                         const ParseOptions& opts);

// Convenience: SplitDevBuffer + ParseRequest.
ParseResult ParseDevBuffer(std::span<const uint8_t> buf,
                           const ParseOptions& opts);

}  // namespace stripefs::fuse
