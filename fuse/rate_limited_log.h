// RateLimitedLog: stderr log lines for bad input that cannot flood the log.
//
// At most `burst` lines per `period`; suppressed lines are counted and
// reported with the next line that gets through. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace stripefs::fuse {

class RateLimitedLog {
 public:
  explicit RateLimitedLog(
      int burst = 10, std::chrono::seconds period = std::chrono::seconds(10))
      : burst_(burst), period_(period) {}
  // Logs "stripefs-fuse: <msg>" unless over the limit. Returns true if
  // printed.
  bool Log(std::string_view msg);
  uint64_t suppressed() const { return suppressed_total_.load(); }

 private:
  int burst_;
  std::chrono::seconds period_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t suppressed_since_ = 0;
  std::atomic<uint64_t> suppressed_total_{0};
};

}  // namespace stripefs::fuse
