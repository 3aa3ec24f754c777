// GangRunner (thread_pool.h): every task of a batch runs at once on its own
// thread (they meet at a barrier no smaller batch could pass), threads are
// kept for the next batch up to the bound, and batches from several
// callers at once each get their own threads.
#include "backend/client/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace stripefs {
namespace {

// n tasks that each wait at one barrier of n: the batch finishes only if
// all n run at the same time.
std::vector<std::function<void()>> MeetingTasks(size_t n, std::barrier<>* meet,
                                                std::atomic<size_t>* ran) {
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < n; ++i) {
    tasks.emplace_back([meet, ran] {
      meet->arrive_and_wait();
      ran->fetch_add(1);
    });
  }
  return tasks;
}

// Whether the gang's thread count falls to `n` (surplus threads leave just
// after their task; bounded wait).
bool SettlesAtMost(GangRunner* gang, size_t n) {
  for (int i = 0; i < 2000 && gang->threads() > n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return gang->threads() <= n;
}

TEST(GangRunnerTest, EveryTaskOfABatchRunsAtOnceAndThreadsAreKept) {
  GangRunner gang(/*keep_idle=*/8);
  std::atomic<size_t> ran{0};
  {
    std::barrier<> meet(16);
    gang.RunAll(MeetingTasks(16, &meet, &ran));
  }
  EXPECT_EQ(ran.load(), 16u);
  // 15 started (the caller ran one); the idle ones past 8 leave once their
  // task is done.
  EXPECT_TRUE(SettlesAtMost(&gang, 8)) << gang.threads() << " threads";
  for (int round = 0; round < 20; ++round) {
    std::barrier<> meet(5);
    gang.RunAll(MeetingTasks(5, &meet, &ran));
  }
  EXPECT_EQ(ran.load(), 16u + 20 * 5);
  // Small batches reuse the kept threads instead of adding more.
  EXPECT_EQ(gang.threads(), 8u);
}

TEST(GangRunnerTest, ConcurrentBatchesEachGetThreadsOfTheirOwn) {
  GangRunner gang(/*keep_idle=*/2);
  std::atomic<size_t> ran{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 10; ++round) {
        std::barrier<> meet(6);
        gang.RunAll(MeetingTasks(6, &meet, &ran));
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(ran.load(), 4u * 10 * 6);
}

TEST(GangRunnerTest, ATaskMayRunABatchOfItsOwn) {
  GangRunner gang(/*keep_idle=*/4);
  std::atomic<size_t> ran{0};
  std::barrier<> outer(3);
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.emplace_back([&] {
      std::barrier<> inner(3);
      gang.RunAll(MeetingTasks(3, &inner, &ran));
      outer.arrive_and_wait();
    });
  }
  gang.RunAll(std::move(tasks));
  EXPECT_EQ(ran.load(), 9u);
}

}  // namespace
}  // namespace stripefs
