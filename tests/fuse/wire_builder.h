// Test helper: builds raw FUSE request buffers as the kernel would send
// them on /dev/fuse (header + fixed struct + names/data).
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/fuse_abi.h"

namespace stripefs::fuse::testing {

class WireRequest {
 public:
  WireRequest(uint32_t opcode, uint64_t unique, uint64_t nodeid = 1) {
    h_.opcode = opcode;
    h_.unique = unique;
    h_.nodeid = nodeid;
    h_.uid = 1000;
    h_.gid = 1000;
    h_.pid = 42;
  }
  template <typename T>
  WireRequest& Struct(const T& t) {
    const auto* p = reinterpret_cast<const uint8_t*>(&t);
    body_.insert(body_.end(), p, p + sizeof(T));
    return *this;
  }
  WireRequest& Name(std::string_view s) {
    body_.insert(body_.end(), s.begin(), s.end());
    body_.push_back(0);
    return *this;
  }
  WireRequest& Bytes(std::string_view s) {
    body_.insert(body_.end(), s.begin(), s.end());
    return *this;
  }
  WireRequest& ExtLen(uint16_t units) {
    h_.total_extlen = units;
    return *this;
  }
  std::vector<uint8_t> Build() const {
    std::vector<uint8_t> out(sizeof(h_) + body_.size());
    fuse_abi::fuse_in_header h = h_;
    h.len = static_cast<uint32_t>(out.size());
    std::memcpy(out.data(), &h, sizeof(h));
    if (!body_.empty())
      std::memcpy(out.data() + sizeof(h), body_.data(), body_.size());
    return out;
  }

 private:
  fuse_abi::fuse_in_header h_{};
  std::vector<uint8_t> body_;
};

// The FUSE_INIT body a kernel of protocol 7.`minor` sends, offering the
// capability bits `offered` (FUSE_INIT_EXT set, high bits in flags2).
inline fuse_abi::fuse_init_in KernelInit(uint32_t minor, uint64_t offered) {
  fuse_abi::fuse_init_in in{};
  in.major = 7;
  in.minor = minor;
  in.max_readahead = 128 * 1024;
  in.flags = static_cast<uint32_t>(offered) |
             static_cast<uint32_t>(fuse_abi::FUSE_INIT_EXT);
  in.flags2 = static_cast<uint32_t>(offered >> 32);
  return in;
}

}  // namespace stripefs::fuse::testing
