// ThreadPool: a fixed set of worker threads running queued closures; used to
// fan chunk I/O out to k+m servers in parallel.
//
// RunAll() queues a batch and blocks until every closure in it has run; it
// may be called from any number of threads at once. Closures must not call
// RunAll() themselves (they would wait on the pool they occupy).
// The destructor finishes queued work and joins the workers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stripefs {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs every task (possibly in parallel) and returns when all are done.
  void RunAll(std::vector<std::function<void()>> tasks);
  // Runs `task` later, not waiting for it.
  void Submit(std::function<void()> task);

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace stripefs
