// INIT negotiation as a pure function: what the kernel offered (fuse_init_in)
// plus what the server wants (InitConfig) give the INIT reply bytes and a
// report of what was agreed (NegotiatedInit). No I/O, no state: the Session
// reads the kernel knobs it needs beforehand and passes them in, so every
// rule here is unit-tested without a kernel.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "fuse/fuse_abi.h"
#include "fuse/session_info.h"

namespace stripefs::fuse {

struct InitConfig {
  InitOptions init;
  // The transport choice wants io-uring (FUSE_OVER_IO_URING is asked for).
  bool want_uring = false;
  // /proc/sys/fs/fuse/max_pages_limit as read by the caller (256 when the
  // knob is absent).
  uint32_t max_pages_limit = 256;
};

struct InitNegotiation {
  // 0, or EPROTO when the kernel speaks another major version; `refusal`
  // then says why in one line and `reply` is unused.
  int error = 0;
  std::string refusal;
  NegotiatedInit report;
  // fuse_init_out bytes, with the opt-alignment byte placed at
  // report.align_offset when alignment was requested.
  std::array<uint8_t, sizeof(fuse_abi::fuse_init_out)> reply{};
};

// `in` holds `in_size` valid bytes of the kernel's struct (old kernels send
// 16); the rest must be zero.
InitNegotiation NegotiateInit(const fuse_abi::fuse_init_in& in,
                              const InitConfig& config);

}  // namespace stripefs::fuse
