#include "backend/client/thread_pool.h"

#include <atomic>
#include <latch>
#include <memory>

namespace stripefs {
namespace {

// `task`, then one count off `done` (shared: the caller may return from its
// wait while this wrapper is still being destroyed on a worker).
std::function<void()> CountingDown(std::shared_ptr<std::latch> done,
                                   std::function<void()> task) {
  return [done = std::move(done), t = std::move(task)] {
    t();
    done->count_down();
  };
}

}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = 1;
  for (size_t i = 0; i < threads; ++i)
    workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::RunAll(std::vector<std::function<void()>> tasks) {
  if (tasks.empty()) return;
  if (tasks.size() == 1) {  // no point in a hand-off
    tasks[0]();
    return;
  }
  auto done = std::make_shared<std::latch>(tasks.size() - 1);
  // The caller runs the first task itself while workers take the rest.
  for (size_t i = 1; i < tasks.size(); ++i) {
    Submit(CountingDown(done, std::move(tasks[i])));
  }
  tasks[0]();
  done->wait();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

GangRunner::~GangRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // no thread leaves threads_ from here on
  }
  cv_.notify_all();
  std::list<std::thread> all;
  std::vector<std::thread> exited;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(threads_);
    exited.swap(exited_);
  }
  for (auto& t : all) t.join();
  for (auto& t : exited) t.join();
}

size_t GangRunner::threads() {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void GangRunner::RunAll(std::vector<std::function<void()>> tasks) {
  if (tasks.empty()) return;
  if (tasks.size() == 1) {
    tasks[0]();
    return;
  }
  auto done = std::make_shared<std::latch>(tasks.size() - 1);
  std::vector<std::thread> exited;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exited.swap(exited_);
    const size_t free = idle_ - queue_.size();
    for (size_t i = free; i < tasks.size() - 1; ++i) {
      auto self = threads_.emplace(threads_.end());
      // Loop takes mu_ before it touches `self`: after this assignment.
      *self = std::thread([this, self] { Loop(self); });
      ++idle_;
    }
    for (size_t i = 1; i < tasks.size(); ++i) {
      queue_.push_back(CountingDown(done, std::move(tasks[i])));
    }
  }
  cv_.notify_all();
  for (auto& t : exited) t.join();
  tasks[0]();
  done->wait();
}

void GangRunner::Loop(std::list<std::thread>::iterator self) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping: the destructor joins us
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    --idle_;
    lock.unlock();
    task();
    task = nullptr;  // the batch's state goes before the count says idle
    lock.lock();
    ++idle_;
    if (!stopping_ && idle_ - queue_.size() > keep_idle_) {
      // Surplus: leave, and let the next RunAll (or the destructor) join.
      --idle_;
      exited_.push_back(std::move(*self));
      threads_.erase(self);
      return;
    }
  }
}

}  // namespace stripefs
