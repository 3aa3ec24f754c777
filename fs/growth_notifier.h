// GrowthNotifier: tells the kernel that a file grew elsewhere (another
// client's commit) when the writeback cache keeps the kernel from taking
// sizes out of attribute replies (fuse_get_cache_mask: it trusts its own
// i_size of a cached inode). Storing the file's last byte at its new size
// (FUSE_NOTIFY_STORE) makes the kernel raise i_size to that size; a store
// never lowers it, so shrinks stay a kernel limit (docs/filesystem.md).
//
// Why a thread: the store locks the page of that byte, and a READ of that
// page may hold the lock while it waits for the request queue of the very
// handler that asks (an io-uring queue thread serves OPEN and GETATTR
// itself). Show() hands the store to this thread and waits at most
// `max_wait` for it; after that the handler answers anyway, its queue
// drains, and the store completes behind it (it still stores the right
// byte: the file's content at that size).
//
// Ownership: owns its thread; `store` must stay callable until Stop() or
// the destructor returns (both wait for a store in progress).
// Thread-safety: Show() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "common/status.h"

namespace stripefs::fs {

class GrowthNotifier {
 public:
  // Puts `data` at `offset` of inode `ino` into the kernel's cache.
  using StoreFn = std::function<Status(uint64_t ino, uint64_t offset,
                                       std::span<const uint8_t> data)>;

  GrowthNotifier(StoreFn store, std::chrono::milliseconds max_wait);
  ~GrowthNotifier();
  GrowthNotifier(const GrowthNotifier&) = delete;
  GrowthNotifier& operator=(const GrowthNotifier&) = delete;

  // Stores `last_byte` at `size - 1` of `ino` (size > 0). True if the store
  // was done and succeeded within max_wait. False once stopped.
  bool Show(uint64_t ino, uint64_t size, uint8_t last_byte);
  // Runs what is queued, then ends the thread (idempotent). After it
  // returns, `store` is never called again.
  void Stop();

 private:
  struct Job {
    uint64_t ino = 0;
    uint64_t size = 0;
    uint8_t byte = 0;
    bool done = false;
    bool ok = false;
  };
  void Loop();

  const StoreFn store_;
  const std::chrono::milliseconds max_wait_;
  std::mutex mu_;
  std::condition_variable cv_;             // work queued or stop
  std::condition_variable done_cv_;        // a job finished
  std::deque<std::shared_ptr<Job>> jobs_;  // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::mutex join_mu_;                     // one joiner at a time
  std::thread thread_;                     // last: uses the above
};

}  // namespace stripefs::fs
