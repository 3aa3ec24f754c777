// StripeMapCache's rules on their own: which fills land, what readers and
// writers may take after a commit, a forget and a distrust.
#include "backend/client/stripe_map_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace stripefs {
namespace {

using Use = StripeMapCache::Use;

StripeVersion V(uint64_t stripe, uint64_t version) {
  return StripeVersion{stripe, version, 0, 4096};
}

// The version of `stripe` the cache names for `use` (0: a hole), or -1 on
// a miss.
int64_t Named(StripeMapCache& c, uint64_t stripe, Use use = Use::kRead) {
  std::vector<StripeVersion> out;
  if (!c.Lookup(7, stripe, 1, &out, use)) return -1;
  return out.empty() ? 0 : static_cast<int64_t>(out.front().version);
}

TEST(StripeMapCacheTest, AFillBegunBeforeACommitLeavesTheCommittedStripeAlone) {
  StripeMapCache c;
  const uint64_t token = c.BeginFill();
  // Metadata answered before this client's commits of stripes 1 and 2.
  c.Committed(7, V(1, 50));
  c.Committed(7, V(2, 51));
  c.Fill(token, 7, 0, 4, {V(0, 10), V(1, 11)});  // stripe 2 was a hole
  EXPECT_EQ(Named(c, 0), 10);
  EXPECT_EQ(Named(c, 1), 50);  // not the replaced 11
  EXPECT_EQ(Named(c, 2), 51);  // not the hole
  EXPECT_EQ(Named(c, 3), 0);
  // A fill begun after the commit names what it read.
  const uint64_t later = c.BeginFill();
  c.Fill(later, 7, 1, 1, {V(1, 60)});
  EXPECT_EQ(Named(c, 1), 60);
  // So does a re-read of one stripe (Put), by the same rule.
  c.Committed(7, V(3, 70));
  c.Put(later, 7, V(3, 12));
  EXPECT_EQ(Named(c, 3), 70);
}

TEST(StripeMapCacheTest, AFillBegunBeforeAForgetIsDropped) {
  StripeMapCache c;
  const uint64_t token = c.BeginFill();
  c.Forget(7);
  c.Fill(token, 7, 0, 4, {V(0, 10)});
  EXPECT_EQ(Named(c, 0), -1);
  EXPECT_EQ(Named(c, 0, Use::kWriteBase), -1);
}

TEST(StripeMapCacheTest, ADistrustedMapServesWritersUntilAFillReadsItAgain) {
  StripeMapCache c;
  c.Fill(c.BeginFill(), 7, 0, 4, {V(0, 10), V(1, 11)});
  const uint64_t before = c.BeginFill();
  c.Distrust(7);
  EXPECT_EQ(Named(c, 0), -1);
  EXPECT_EQ(Named(c, 0, Use::kWriteBase), 10);
  EXPECT_EQ(Named(c, 2, Use::kWriteBase), 0);
  c.Fill(before, 7, 0, 4, {V(0, 1)});  // begun before the distrust: dropped
  EXPECT_EQ(Named(c, 0, Use::kWriteBase), 10);
  // A commit after the distrust, then a fill begun before that commit:
  // the fill starts the map again (readers may use it), the commit stays.
  const uint64_t token = c.BeginFill();
  c.Committed(7, V(3, 80));
  c.Fill(token, 7, 0, 2, {V(0, 20)});
  EXPECT_EQ(Named(c, 0), 20);
  EXPECT_EQ(Named(c, 1), 0);
  EXPECT_EQ(Named(c, 3), 80);
  EXPECT_EQ(Named(c, 2), -1);  // dropped with the distrusted map
}

TEST(StripeMapCacheTest, ReadThroughReadsAWindowOnceAndServesFromIt) {
  StripeMapCache c;
  std::vector<std::pair<uint64_t, uint64_t>> reads;
  auto read = [&](uint64_t first,
                  uint64_t count) -> Result<std::vector<StripeVersion>> {
    reads.emplace_back(first, count);
    return std::vector<StripeVersion>{V(4, 40), V(5, 50), V(9, 90)};
  };
  auto got = c.ReadThrough(7, 4, 2, 8, Use::kRead, read);
  ASSERT_TRUE(got.ok());
  // The caller gets its own range; the whole window is cached.
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].version, 50u);
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0], std::make_pair(uint64_t{4}, uint64_t{8}));
  got = c.ReadThrough(7, 9, 1, 8, Use::kRead, read);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(got->front().version, 90u);
  EXPECT_EQ(reads.size(), 1u);  // a hit: no second read
  // A window smaller than the range asked for still covers the range.
  got = c.ReadThrough(7, 20, 3, 1, Use::kWriteBase, read);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[1], std::make_pair(uint64_t{20}, uint64_t{3}));
}

TEST(StripeMapCacheTest, ReadThroughCachesNothingWhenTheReadFails) {
  StripeMapCache c;
  int calls = 0;
  auto fail = [&](uint64_t, uint64_t) -> Result<std::vector<StripeVersion>> {
    ++calls;
    return Status::Unavailable("metad down");
  };
  EXPECT_EQ(c.ReadThrough(7, 0, 1, 4, Use::kRead, fail).status().code(),
            Status::Unavailable("").code());
  EXPECT_EQ(Named(c, 0), -1);
  EXPECT_FALSE(c.ReadThrough(7, 0, 1, 4, Use::kRead, fail).ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace stripefs
