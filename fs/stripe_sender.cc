#include "fs/stripe_sender.h"

#include <algorithm>
#include <utility>

namespace stripefs::fs {

StripeSender::StripeSender(size_t window)
    : window_(std::max<size_t>(window, 1)), pool_(window_) {}

void StripeSender::Submit(std::function<void()> send) {
  {
    UniqueMutexLock lock(&mu_);
    if (in_use_ >= window_) {
      full_waits_.fetch_add(1, std::memory_order_relaxed);
      cv_.wait(lock.native(), [&] {
        mu_.AssertHeld();
        return in_use_ < window_;
      });
    }
    ++in_use_;
  }
  pool_.Submit([this, send = std::move(send)] {
    send();
    MutexLock lock(&mu_);
    --in_use_;
    cv_.notify_one();
  });
}

}  // namespace stripefs::fs
