#include "backend/client/thread_pool.h"

#include <atomic>
#include <memory>

namespace stripefs {

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
  struct Batch {
    std::mutex mu;
    std::condition_variable done;
    size_t left;
  };
  auto batch = std::make_shared<Batch>();
  batch->left = tasks.size() - 1;
  // The caller runs the first task itself while workers take the rest.
  for (size_t i = 1; i < tasks.size(); ++i) {
    Submit([batch, t = std::move(tasks[i])] {
      t();
      std::lock_guard<std::mutex> lock(batch->mu);
      if (--batch->left == 0) batch->done.notify_all();
    });
  }
  tasks[0]();
  std::unique_lock<std::mutex> lock(batch->mu);
  batch->done.wait(lock, [&] { return batch->left == 0; });
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

}  // namespace stripefs
