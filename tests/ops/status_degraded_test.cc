// `stripefs status`'s judgement of why a stripe is degraded and the advice
// it prints for each cause (tools/status_degraded.h): stripes committed
// degraded for lack of space are left to the mounts' degraded queues (no
// `stripefs repair` advice), those degraded by servers down get it.
#include "tools/status_degraded.h"

#include <gtest/gtest.h>

namespace stripefs::tools {
namespace {

const std::string kRepair = "stripefs repair --meta M --key FILE";

// Servers 0..5; `down` not usable, `full` in their reserve.
std::map<uint32_t, StatusServer> Servers(std::vector<uint32_t> down,
                                         std::vector<uint32_t> full) {
  std::map<uint32_t, StatusServer> s;
  for (uint32_t i = 0; i < 6; ++i) s[i] = {true, false};
  for (uint32_t d : down) s[d].usable = false;
  for (uint32_t f : full) s[f].full = true;
  return s;
}

const std::vector<uint32_t> kIds = {3, 1, 4, 0, 5, 2};  // chunk i -> server

TEST(StatusDegradedTest, WholeStripeOnUsableServersIsNotDegraded) {
  EXPECT_EQ(ClassifyDegraded(0, kIds, Servers({}, {1})), DegradedCause::kNone);
}

TEST(StatusDegradedTest, MissingChunksOnFullServersAreForLackOfSpace) {
  // Chunks 1 and 2 live on servers 1 and 4, both in their reserve.
  EXPECT_EQ(ClassifyDegraded(0b110, kIds, Servers({}, {1, 4})),
            DegradedCause::kNoSpace);
  // One of them has room again: not (only) space; a rebuild will do.
  EXPECT_EQ(ClassifyDegraded(0b110, kIds, Servers({}, {1})),
            DegradedCause::kRebuild);
}

TEST(StatusDegradedTest, AServerDownOutweighsSpace) {
  // Chunk 1's server is full, chunk 5's server (2) is down.
  EXPECT_EQ(ClassifyDegraded(0b10, kIds, Servers({2}, {1})),
            DegradedCause::kUnavailable);
  // A server missing from the map counts as unavailable too.
  auto s = Servers({}, {});
  s.erase(0);
  EXPECT_EQ(ClassifyDegraded(0, kIds, s), DegradedCause::kUnavailable);
}

TEST(StatusDegradedTest, AdviceNamesRepairOnlyWhereRepairHelps) {
  DegradedCounts space;
  space.Add(DegradedCause::kNoSpace);
  space.Add(DegradedCause::kNoSpace);
  auto lines = DegradedAdvice(space, kRepair);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("2 stripes committed degraded for lack of space"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find(kRepair), std::string::npos) << lines[0];

  DegradedCounts mixed = space;
  mixed.Add(DegradedCause::kUnavailable);
  mixed.Add(DegradedCause::kRebuild);
  mixed.Add(DegradedCause::kNone);
  EXPECT_EQ(mixed.total(), 4u);
  lines = DegradedAdvice(mixed, kRepair);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("1 stripes degraded by servers down"),
            std::string::npos);
  EXPECT_NE(lines[0].find(kRepair), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find(kRepair), std::string::npos) << lines[2];
  EXPECT_TRUE(DegradedAdvice(DegradedCounts{}, kRepair).empty());
}

}  // namespace
}  // namespace stripefs::tools
