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

}  // namespace
}  // namespace stripefs
