// ThreadPool: a fixed set of worker threads running queued closures; used to
// fan chunk I/O out to k+m servers in parallel.
//
// RunAll() queues a batch and blocks until every closure in it has run; it
// may be called from any number of threads at once. Closures must not call
// RunAll() themselves (they would wait on the pool they occupy).
// The destructor finishes queued work and joins the workers.
//
// GangRunner: runs each closure of a batch on its own thread, all at once,
// so that they may wait for one another (the stripes of a write wave meet
// at a rendezvous). It starts threads only when too few are idle and keeps
// up to `keep_idle` of them for the next batch, so a batch costs wake-ups,
// not thread creation (a thread per stripe was ~10 % of the FUSE daemon's
// CPU in 4 KiB random writes with fsync). Thread-safety: RunAll may be
// called from any number of threads at once; closures may call RunAll (a
// nested batch gets threads of its own). The destructor waits for running
// batches' threads and joins all of them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
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

class GangRunner {
 public:
  explicit GangRunner(size_t keep_idle) : keep_idle_(keep_idle) {}
  ~GangRunner();
  GangRunner(const GangRunner&) = delete;
  GangRunner& operator=(const GangRunner&) = delete;

  // Runs every task at once, each on its own thread (the caller's thread
  // runs the first), and returns when all are done.
  void RunAll(std::vector<std::function<void()>> tasks);
  // Threads alive now (idle or running a task).
  size_t threads();

 private:
  void Loop(std::list<std::thread>::iterator self);

  const size_t keep_idle_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  // Threads not running a task (waiting, or started and not yet taken
  // one): RunAll keeps idle_ >= queue_.size(), so every queued task has a
  // thread of its own.
  size_t idle_ = 0;
  bool stopping_ = false;
  std::list<std::thread> threads_;
  std::vector<std::thread> exited_;  // left as surplus; joined by RunAll
};

}  // namespace stripefs
