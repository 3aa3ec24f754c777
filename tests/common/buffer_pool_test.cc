#include "common/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace stripefs {
namespace {

TEST(BufferPoolTest, ReleasedBuffersAreReusedUpToTheIdleBound) {
  BufferPool pool(4096, 2);
  std::vector<BufferPool::Lease> held;
  std::set<const uint8_t*> first;
  for (int i = 0; i < 3; ++i) {
    held.push_back(pool.Get());
    ASSERT_EQ(held.back().size(), 4096u);
    first.insert(held.back().data());
  }
  EXPECT_EQ(pool.allocations(), 3u);
  EXPECT_EQ(first.size(), 3u);
  held.clear();  // three released, two kept
  EXPECT_EQ(pool.idle(), 2u);
  auto a = pool.Get();
  auto b = pool.Get();
  EXPECT_EQ(pool.reuses(), 2u);
  EXPECT_TRUE(first.count(a.data()) && first.count(b.data()));
  EXPECT_EQ(pool.idle(), 0u);
  auto c = pool.Get();  // none idle: allocates, never blocks
  EXPECT_EQ(pool.allocations(), 4u);
  EXPECT_FALSE(c.empty());
}

// Buffers are placed so that data() + align_at is 4 KiB-aligned (default:
// data() itself), new and reused alike, and outstanding() counts leases
// not given back (moved leases count once).
TEST(BufferPoolTest, BuffersArePlacedForAlignmentAndCounted) {
  for (size_t align_at : {size_t{0}, size_t{80}, size_t{4095}}) {
    SCOPED_TRACE(align_at);
    BufferPool pool(256 * 1024 + 3, 1, align_at);
    EXPECT_EQ(pool.align_at(), align_at);
    std::vector<BufferPool::Lease> held;
    for (int i = 0; i < 3; ++i) {
      held.push_back(pool.Get());
      const auto p = reinterpret_cast<uintptr_t>(held.back().data());
      EXPECT_EQ((p + align_at) % BufferPool::kBufferAlign, 0u);
      EXPECT_EQ(held.back().size(), 256u * 1024 + 3);
      // Every byte is usable.
      std::memset(held.back().data(), 0x5A, held.back().size());
    }
    EXPECT_EQ(pool.outstanding(), 3u);
    BufferPool::Lease moved = std::move(held[0]);
    EXPECT_EQ(pool.outstanding(), 3u);
    held.clear();
    EXPECT_EQ(pool.outstanding(), 1u);
    moved.reset();
    EXPECT_EQ(pool.outstanding(), 0u);
    auto again = pool.Get();  // the idle one, reused
    EXPECT_EQ(pool.reuses(), 1u);
    EXPECT_EQ((reinterpret_cast<uintptr_t>(again.data()) + align_at) %
                  BufferPool::kBufferAlign,
              0u);
  }
}

TEST(BufferPoolTest, ContentsAreNotClearedOnReuse) {
  // The contract: a reused buffer holds its last user's bytes (callers must
  // not expect zeros). This pins that down so nobody relies on zeroing.
  BufferPool pool(64, 1);
  const uint8_t* where = nullptr;
  {
    auto l = pool.Get();
    std::memset(l.data(), 0xAB, l.size());
    where = l.data();
  }
  auto l = pool.Get();
  ASSERT_EQ(l.data(), where);
  EXPECT_EQ(l.data()[0], 0xAB);
  EXPECT_EQ(l.data()[63], 0xAB);
}

TEST(BufferPoolTest, MovedAndResetLeasesReturnOnce) {
  BufferPool pool(128, 4);
  auto a = pool.Get();
  BufferPool::Lease b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size(), 0u);
  b.reset();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.idle(), 1u);
  BufferPool::Lease c = pool.Get();
  BufferPool::Lease d = pool.Get();
  c = std::move(d);  // c's old buffer goes back, d's moves into c
  EXPECT_EQ(pool.idle(), 1u);
}

// The lease keeps its buffer and the pool's state alive. A use after free
// here is caught by the sanitizer pass (scripts/test.sh runs this group under
// ASan); without it, the bytes must still be the lease's own after other
// allocations of the same size reuse whatever the pool freed.
TEST(BufferPoolTest, LeaseMayOutliveThePool) {
  BufferPool::Lease l;
  {
    BufferPool pool(256, 1);
    l = pool.Get();
    BufferPool::Lease idle = pool.Get();  // given back: the pool frees it
  }
  ASSERT_FALSE(l.empty());
  ASSERT_EQ(l.size(), 256u);
  std::memset(l.data(), 0x5a, l.size());
  std::vector<std::unique_ptr<uint8_t[]>> others;
  for (int i = 0; i < 8; ++i) {
    others.emplace_back(new uint8_t[256 + 4096]);
    std::memset(others.back().get(), 0xa5, 256 + 4096);
  }
  for (size_t i = 0; i < l.size(); ++i) ASSERT_EQ(l.data()[i], 0x5a) << i;
  l.reset();
  EXPECT_TRUE(l.empty());
}

TEST(BufferPoolTest, ConcurrentGetAndReleaseStayBounded) {
  BufferPool pool(1024, 3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        auto l = pool.Get();
        l.data()[0] = static_cast<uint8_t>(t);
        l.data()[l.size() - 1] = static_cast<uint8_t>(i);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(pool.idle(), 3u);
  EXPECT_EQ(pool.reuses() + pool.allocations(), 8000u);
  EXPECT_GT(pool.reuses(), 0u);
}

}  // namespace
}  // namespace stripefs
