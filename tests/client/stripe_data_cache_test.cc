// StripeDataCache: stripe buffers come from its pool and are reused only
// once nobody holds them.
#include "backend/client/stripe_data_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace stripefs {
namespace {

constexpr size_t kStripe = size_t{1} << 20;

CachedStripePtr Filled(StripeDataCache& cache, size_t n, uint8_t byte) {
  auto c = std::make_shared<CachedStripe>();
  cache.Allocate(c.get(), n);
  std::memset(c->bytes(), byte, n);
  return c;
}

TEST(StripeDataCacheTest, StripeBuffersAreReusedOnlyAfterTheirLastHolder) {
  StripeDataCache cache(4 * kStripe, kStripe);
  // A reader still holds stripe 1 after the cache evicted it: its bytes
  // stay; the buffer is not handed out again meanwhile.
  const StripeDataCache::Key k1{7, 1, 1};
  auto p1 = cache.Reserve(k1, kStripe);
  ASSERT_NE(p1, nullptr);
  cache.Complete(k1, p1, Filled(cache, kStripe, 0xA1));
  p1.reset();  // as a finished load does: the promise holds the stripe too
  CachedStripePtr held = cache.Find(k1)->get();
  ASSERT_NE(held, nullptr);
  for (uint64_t s = 2; s <= 5; ++s) {  // evicts stripe 1
    const StripeDataCache::Key k{7, s, 1};
    auto p = cache.Reserve(k, kStripe);
    ASSERT_NE(p, nullptr);
    cache.Complete(k, p, Filled(cache, kStripe, static_cast<uint8_t>(s)));
  }  // their promises go; the cache alone holds stripes 2..5
  EXPECT_FALSE(cache.Find(k1).has_value());
  EXPECT_EQ(cache.buffers().reuses(), 0u);
  std::vector<uint8_t> want(kStripe, 0xA1);
  EXPECT_EQ(std::memcmp(held->bytes(), want.data(), kStripe), 0);
  // Once released, the next stripe gets that buffer back (no allocation).
  const uint8_t* was = held->bytes();
  held.reset();
  auto again = std::make_shared<CachedStripe>();
  cache.Allocate(again.get(), kStripe / 2);  // a short stripe fits too
  EXPECT_EQ(cache.buffers().reuses(), 1u);
  EXPECT_EQ(again->bytes(), was);
  // Larger than the pool's buffers: its own allocation.
  auto big = std::make_shared<CachedStripe>();
  cache.Allocate(big.get(), kStripe + 1);
  EXPECT_TRUE(big->pooled.empty());
  ASSERT_NE(big->bytes(), nullptr);
  EXPECT_EQ(cache.buffers().outstanding(), 5u);  // 2..5 and `again`
}

}  // namespace
}  // namespace stripefs
