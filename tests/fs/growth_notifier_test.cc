// GrowthNotifier: the store it is given gets the file's last byte at
// size - 1, and a store that cannot finish (the kernel waits on a page a
// queued READ holds) does not hold the asking handler: Show() gives up,
// and the store completes later on the notifier's thread. After Stop()
// (the session is going away) nothing is stored.
#include "fs/growth_notifier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace stripefs::fs {
namespace {

struct Stored {
  uint64_t ino, offset;
  std::vector<uint8_t> data;
};

TEST(GrowthNotifierTest, StoresTheLastByteAtSizeMinusOne) {
  std::vector<Stored> stored;
  std::mutex mu;
  GrowthNotifier n(
      [&](uint64_t ino, uint64_t off, std::span<const uint8_t> d) {
        std::lock_guard<std::mutex> lock(mu);
        stored.push_back({ino, off, {d.begin(), d.end()}});
        return Status::Ok();
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(n.Show(7, 4096 + 10, 0xab));
  EXPECT_FALSE(n.Show(7, 0, 0));  // nothing to store in an empty file
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].ino, 7u);
  EXPECT_EQ(stored[0].offset, 4096u + 9);
  EXPECT_EQ(stored[0].data, std::vector<uint8_t>{0xab});
}

TEST(GrowthNotifierTest, AFailedStoreIsReported) {
  GrowthNotifier n(
      [](uint64_t, uint64_t, std::span<const uint8_t>) {
        return Status(ENOENT, "kernel does not know the inode");
      },
      std::chrono::seconds(30));
  EXPECT_FALSE(n.Show(7, 1, 1));
}

TEST(GrowthNotifierTest, AfterStopNothingIsStored) {
  std::atomic<int> calls{0};
  GrowthNotifier n(
      [&](uint64_t, uint64_t, std::span<const uint8_t>) {
        calls++;
        return Status::Ok();
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(n.Show(1, 10, 0));
  n.Stop();
  n.Stop();  // idempotent
  EXPECT_FALSE(n.Show(1, 20, 0));
  EXPECT_EQ(calls.load(), 1);
}

TEST(GrowthNotifierTest, AStoreThatWaitsDoesNotHoldTheCaller) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> finished{0};
  {
    GrowthNotifier n(
        [&](uint64_t, uint64_t, std::span<const uint8_t>) {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return release; });
          finished++;
          return Status::Ok();
        },
        std::chrono::milliseconds(20));
    EXPECT_FALSE(n.Show(1, 100, 0));  // the store is still blocked
    EXPECT_EQ(finished.load(), 0);
    {
      std::lock_guard<std::mutex> lock(mu);
      release = true;  // the page is unlocked: the store completes
    }
    cv.notify_all();
  }  // the destructor waits for the store in progress
  EXPECT_EQ(finished.load(), 1);
}

}  // namespace
}  // namespace stripefs::fs
