#pragma once

// Whether this machine refuses io_uring, asked of the kernel directly
// (io_uring_setup(4)), never of the product: a product that silently falls
// back to poll must fail its io_uring tests, not skip them. The message is the
// one scripts/ctest_report.py checks against the same syscall.
// Header-only; thread-safe (a syscall and nothing shared).

#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace stripefs::testing {

// "" when io_uring_setup works here, else why not (for GTEST_SKIP).
inline std::string IoUringRefusedReason() {
  io_uring_params p{};
  long fd = ::syscall(__NR_io_uring_setup, 4, &p);
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
    return "";
  }
  return std::string("io_uring_setup fails on this machine: ") +
         std::strerror(errno);
}

}  // namespace stripefs::testing
