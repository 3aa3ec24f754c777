#include "fs/growth_notifier.h"

#include <utility>

namespace stripefs::fs {

GrowthNotifier::GrowthNotifier(StoreFn store,
                               std::chrono::milliseconds max_wait)
    : store_(std::move(store)),
      max_wait_(max_wait),
      thread_([this] { Loop(); }) {}

GrowthNotifier::~GrowthNotifier() { Stop(); }

void GrowthNotifier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

bool GrowthNotifier::Show(uint64_t ino, uint64_t size, uint8_t last_byte) {
  if (size == 0) return false;
  auto job = std::make_shared<Job>();
  job->ino = ino;
  job->size = size;
  job->byte = last_byte;
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_) return false;
  jobs_.push_back(job);
  cv_.notify_one();
  done_cv_.wait_for(lock, max_wait_, [&] { return job->done; });
  return job->done && job->ok;
}

void GrowthNotifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_, nothing left
    std::shared_ptr<Job> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    const uint8_t byte = job->byte;
    const bool ok = store_(job->ino, job->size - 1, {&byte, 1}).ok();
    lock.lock();
    job->ok = ok;
    job->done = true;
    done_cv_.notify_all();
  }
}

}  // namespace stripefs::fs
