// StripeSender: the mount-wide pool that runs StripeWriter's pipelined
// stripe sends (stripe_writer.h) and bounds how many are in flight.
//
// Ownership: owns its threads. Thread-safety: Submit from any thread; the
// slot count is guarded by mu_ (checked by clang's -Wthread-safety).
// Limits: window() sends at once; a Submit beyond waits for a free slot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/client/thread_pool.h"
#include "common/thread_annotations.h"

namespace stripefs::fs {

// Runs the pipelined stripe sends of a mount (one thread per window slot)
// and bounds how many are in flight, and with them the memory they hold.
// Thread-safe; must outlive every StripeWriter that uses it (its
// destructor finishes the queued sends).
class StripeSender {
 public:
  explicit StripeSender(size_t window);  // window >= 1
  StripeSender(const StripeSender&) = delete;
  StripeSender& operator=(const StripeSender&) = delete;

  size_t window() const { return window_; }
  // Waits for a free slot, then runs `send` on a sender thread; the slot is
  // freed when `send` returns.
  void Submit(std::function<void()> send);
  // Submit() calls that found the window full.
  uint64_t full_waits() const { return full_waits_.load(); }

 private:
  const size_t window_;
  Mutex mu_;
  std::condition_variable cv_;
  size_t in_use_ STRIPEFS_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> full_waits_{0};
  ThreadPool pool_;  // last: destroyed (and drained) first
};

}  // namespace stripefs::fs
