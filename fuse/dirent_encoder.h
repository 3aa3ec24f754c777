// Encoders for READDIR / READDIRPLUS reply bodies.
//
// Entries are packed as the kernel expects: fuse_dirent (24 bytes) or
// fuse_direntplus (152 bytes) followed by the name, each entry padded to a
// multiple of 8 bytes. `off` is the cookie the kernel passes back as
// fuse_read_in.offset to continue after this entry. Add() refuses (returns
// false) an entry that does not fit in the buffer, so a file system adds
// entries until Add() fails and replies with bytes().
//
// The encoder writes into a caller-provided span (e.g. Replier::ReplyBuffer
// of fuse_read_in.size bytes) and does not own it. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fuse/fuse_abi.h"

namespace stripefs::fuse {

class DirentEncoder {
 public:
  explicit DirentEncoder(std::span<uint8_t> buf) : buf_(buf) {}
  // type: DT_* value (S_IFMT >> 12). False if the entry does not fit or the
  // name is empty/too long (> 1024) or contains '/' or NUL.
  bool Add(uint64_t ino, std::string_view name, uint32_t type, uint64_t off);
  std::span<const uint8_t> bytes() const { return buf_.first(used_); }
  size_t size() const { return used_; }
  size_t entries() const { return entries_; }

 private:
  std::span<uint8_t> buf_;
  size_t used_ = 0;
  size_t entries_ = 0;
};

class DirentPlusEncoder {
 public:
  explicit DirentPlusEncoder(std::span<uint8_t> buf) : buf_(buf) {}
  // entry.nodeid == 0 means "no lookup done" (the kernel then does not take
  // a reference); entry.attr.ino/mode should match ino/type.
  bool Add(const fuse_abi::fuse_entry_out& entry, std::string_view name,
           uint32_t type, uint64_t off);
  std::span<const uint8_t> bytes() const { return buf_.first(used_); }
  size_t size() const { return used_; }
  size_t entries() const { return entries_; }

 private:
  std::span<uint8_t> buf_;
  size_t used_ = 0;
  size_t entries_ = 0;
};

// Walks an encoded READDIR body (for tests and tools). Calls fn(ino, name,
// type, off) per entry; false if the body is malformed.
template <typename Fn>
bool ForEachDirent(std::span<const uint8_t> body, Fn fn);
// Same for READDIRPLUS: fn(entry_out, name, type, off).
template <typename Fn>
bool ForEachDirentPlus(std::span<const uint8_t> body, Fn fn);

}  // namespace stripefs::fuse

#include "fuse/dirent_encoder_inl.h"
