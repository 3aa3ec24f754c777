// BackgroundQueue: batches in push order, the capacity bound (Push blocks
// while full), Drain as a barrier, the destructor handling what is left, and
// the linger: pushes that join a lingering batch do not wake the worker.
#include "backend/client/background_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace stripefs {
namespace {

// A handler whose first call waits until Open(), so tests can fill the
// queue behind it deterministically.
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct Recorder {
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  std::promise<void> first_started;
  std::atomic<bool> started{false};
  Gate gate;
  void Handle(std::vector<int> batch) {
    if (!started.exchange(true)) {
      first_started.set_value();
      gate.Wait();
    }
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(std::move(batch));
  }
};

TEST(BackgroundQueueTest, BatchesInPushOrderUpToMaxBatch) {
  Recorder r;
  auto started = r.first_started.get_future();
  {
    BackgroundQueue<int> q(100, 4,
                           [&](std::vector<int> b) { r.Handle(std::move(b)); });
    q.Push(0);
    started.wait();  // the worker holds {0}; the rest queue up behind it
    for (int i = 1; i <= 10; ++i) q.Push(i);
    EXPECT_EQ(q.queued(), 10u);
    r.gate.Open();
    q.Drain();
    std::lock_guard<std::mutex> lock(r.mu);
    ASSERT_EQ(r.batches.size(), 4u);
    EXPECT_EQ(r.batches[0], (std::vector<int>{0}));
    EXPECT_EQ(r.batches[1], (std::vector<int>{1, 2, 3, 4}));
    EXPECT_EQ(r.batches[2], (std::vector<int>{5, 6, 7, 8}));
    EXPECT_EQ(r.batches[3], (std::vector<int>{9, 10}));
  }
}

TEST(BackgroundQueueTest, PushBlocksWhileFull) {
  Recorder r;
  auto started = r.first_started.get_future();
  BackgroundQueue<int> q(2, 0,
                         [&](std::vector<int> b) { r.Handle(std::move(b)); });
  q.Push(0);
  started.wait();
  q.Push(1);
  q.Push(2);  // full now
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    q.Push(3);
    pushed = true;
  });
  // Bounded check that the producer is still blocked: it cannot get past a
  // full queue while the handler is held, however long we look.
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_FALSE(pushed.load());
  }
  EXPECT_EQ(q.queued(), 2u);
  r.gate.Open();
  producer.join();
  EXPECT_TRUE(pushed.load());
  q.Drain();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<int> all;
  for (const auto& b : r.batches) all.insert(all.end(), b.begin(), b.end());
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2, 3}));
}

TEST(BackgroundQueueTest, DestructorHandlesEverythingQueued) {
  std::atomic<int> handled{0};
  {
    BackgroundQueue<int> q(1000, 7, [&](std::vector<int> b) {
      handled += static_cast<int>(b.size());
    });
    for (int i = 0; i < 500; ++i) q.Push(i);
  }
  EXPECT_EQ(handled.load(), 500);
}

TEST(BackgroundQueueTest, DrainFromManyThreads) {
  std::atomic<int> handled{0};
  BackgroundQueue<int> q(
      8, 0, [&](std::vector<int> b) { handled += static_cast<int>(b.size()); });
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&] {
      for (int i = 0; i < 100; ++i) q.Push(i);
      q.Drain();  // everything this thread pushed is handled now
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(handled.load(), 400);
}

// Items pushed while the worker lingers join one batch without waking it:
// only the first push notifies (a wake-up per item cost the orphan purger a
// context switch per unlink).
TEST(BackgroundQueueTest, PushesDuringLingerDoNotWakeTheWorker) {
  std::mutex mu;
  std::vector<size_t> sizes;
  BackgroundQueue<int> q(
      100, 0,
      [&](std::vector<int> b) {
        std::lock_guard<std::mutex> lock(mu);
        sizes.push_back(b.size());
      },
      std::chrono::seconds(60));
  for (int i = 0; i < 20; ++i) q.Push(i);
  EXPECT_EQ(q.push_wakeups(), 1u);
  q.Drain();  // cuts the linger short
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(sizes, (std::vector<size_t>{20}));
}

// A half-full queue still ends the linger (without Drain): the push that
// fills it to half notifies.
TEST(BackgroundQueueTest, HalfFullQueueEndsTheLinger) {
  std::promise<size_t> first;
  std::atomic<bool> once{false};
  BackgroundQueue<int> q(
      10, 0,
      [&](std::vector<int> b) {
        if (!once.exchange(true)) first.set_value(b.size());
      },
      std::chrono::hours(1));
  auto got = first.get_future();
  for (int i = 0; i < 5; ++i) q.Push(i);
  ASSERT_EQ(got.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "a half-full queue did not end the linger";
  EXPECT_EQ(got.get(), 5u);
  EXPECT_EQ(q.push_wakeups(), 2u);  // the first item and the fifth
}

}  // namespace
}  // namespace stripefs
