#include "fuse/rate_limited_log.h"

#include <cstdio>
#include <string>

namespace stripefs::fuse {

bool RateLimitedLog::Log(std::string_view msg) {
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= period_) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++suppressed_since_;
      suppressed_total_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    ++in_window_;
    suppressed = suppressed_since_;
    suppressed_since_ = 0;
  }
  std::string line = "stripefs-fuse: " + std::string(msg);
  if (suppressed) {
    line += " (" + std::to_string(suppressed) + " similar lines suppressed)";
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  return true;
}

}  // namespace stripefs::fuse
