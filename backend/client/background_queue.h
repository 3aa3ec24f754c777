// BackgroundQueue<T>: a bounded FIFO of work items, one worker thread that
// hands them to a handler in batches, and Drain() (a barrier: wait until
// everything queued before the call has been handled). The loop that the
// version collector and the orphan purger share.
//
// Bound: at most `capacity` items wait; Push blocks while the queue is full,
// so producers slow down to the worker's pace and memory stays bounded
// (items are never dropped or merged: each is work that must happen). The
// worker takes up to `max_batch` queued items per handler call (0 = all of
// them), in Push order, one batch at a time. With a `linger`, the worker
// waits up to that long after the first item of a batch for more to arrive
// (so several producers' work shares one handler call: one delete request
// and one index sync per server); Drain, a half-full queue or the
// destructor cuts the wait short.
//
// Stop: the destructor lets the worker handle everything queued (including
// items pushed while it runs), then joins it. Declare the queue after
// everything the handler uses, so it is destroyed first.
//
// Thread-safety: Push and Drain may be called from any thread, but not from
// the handler (Drain would wait for itself; Push could block on a full
// queue that only the handler's thread empties).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace stripefs {

template <typename T>
class BackgroundQueue {
 public:
  using Handler = std::function<void(std::vector<T> batch)>;

  BackgroundQueue(size_t capacity, size_t max_batch, Handler handler,
                  std::chrono::milliseconds linger = {})
      : capacity_(capacity == 0 ? 1 : capacity),
        max_batch_(max_batch == 0 ? std::numeric_limits<size_t>::max()
                                  : max_batch),
        linger_(linger),
        handler_(std::move(handler)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~BackgroundQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();  // Loop() empties the queue before it returns
  }
  BackgroundQueue(const BackgroundQueue&) = delete;
  BackgroundQueue& operator=(const BackgroundQueue&) = delete;

  // Queues `item`; blocks while `capacity` items wait. Wakes the worker
  // only when it has something to do: the first item (it waits for one) or
  // a half-full queue (ends its linger). A push in between would wake a
  // lingering worker just to go back to sleep (one context switch per item:
  // per unlink, for the orphan purger); nobody else waits for a push
  // (blocked pushers wait for room, Drain for handled items).
  void Push(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < capacity_ || stopping_; });
    queue_.push_back(std::move(item));
    ++pushed_;
    if (queue_.size() == 1 || queue_.size() * 2 >= capacity_) {
      ++wakeups_;
      cv_.notify_all();
    }
  }
  // Returns once every item pushed before the call has been handled.
  void Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = pushed_;
    ++draining_;
    cv_.notify_all();  // cut a linger short
    cv_.wait(lock, [&] { return handled_ >= target; });
    --draining_;
  }
  size_t capacity() const { return capacity_; }
  // Pushes that woke the worker (the others joined a batch quietly).
  uint64_t push_wakeups() const {
    std::lock_guard<std::mutex> lock(mu_);
    return wakeups_;
  }
  // Items waiting (not yet taken by the worker).
  size_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and drained
      if (linger_.count() > 0) {
        cv_.wait_for(lock, linger_, [&] {
          return stopping_ || draining_ > 0 || queue_.size() * 2 >= capacity_;
        });
      }
      const size_t n = std::min(queue_.size(), max_batch_);
      std::vector<T> batch(std::make_move_iterator(queue_.begin()),
                           std::make_move_iterator(queue_.begin() + n));
      queue_.erase(queue_.begin(), queue_.begin() + n);
      cv_.notify_all();  // room for blocked Push calls
      lock.unlock();
      handler_(std::move(batch));
      lock.lock();
      handled_ += n;
      cv_.notify_all();
    }
  }

  const size_t capacity_;
  const size_t max_batch_;
  const std::chrono::milliseconds linger_;
  const Handler handler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // queue changed or handled_ advanced
  std::deque<T> queue_;         // guarded by mu_
  uint64_t pushed_ = 0;         // items ever pushed; guarded by mu_
  uint64_t handled_ = 0;        // items ever handled; guarded by mu_
  uint64_t wakeups_ = 0;        // pushes that notified; guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  int draining_ = 0;            // Drain() calls waiting; guarded by mu_
  std::thread thread_;          // last: started after the fields above
};

}  // namespace stripefs
