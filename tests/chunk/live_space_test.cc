// The live-space arithmetic (live_space.h), tested directly: segment byte
// ranges of chunk versions, merged, subtracted and counted, no store.
#include "backend/chunk/live_space.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace stripefs::live_space {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

ChunkIndexValue InSegments(std::vector<ChunkPiece> pieces) {
  ChunkIndexValue v;
  v.in_segment = true;
  for (const ChunkPiece& p : pieces) v.length += p.length;
  v.pieces = std::move(pieces);
  return v;
}

TEST(LiveSpaceTest, AddRangesTakesEachPieceRoundedToTheSegmentAlignment) {
  // 5000 bytes occupy two 4 KiB units of their segment.
  const ChunkIndexValue v = InSegments({{0, 5000, 3, 8192}, {5000, 100, 4, 0}});
  RangeSet r;
  AddRanges(v, &r);
  EXPECT_EQ(r, (RangeSet{{3, {{8192, 8192 + 8192}}}, {4, {{0, 4096}}}}));
  // `only` keeps the pieces in the segments named.
  RangeSet only4;
  const std::vector<uint64_t> segs = {4};
  AddRanges(v, &only4, &segs);
  EXPECT_EQ(only4, (RangeSet{{4, {{0, 4096}}}}));
}

TEST(LiveSpaceTest, AChunkInItsOwnFileHasNoSegmentRanges) {
  ChunkIndexValue legacy;
  legacy.length = 4096;
  RangeSet r;
  AddRanges(legacy, &r);
  EXPECT_TRUE(r.empty());
  EXPECT_FALSE(HasPieceIn(legacy, 0));
}

TEST(LiveSpaceTest, NormalizeSortsAndMergesOverlappingAndTouchingRanges) {
  RangeSet r = {
      {1, {{8192, 12288}, {0, 4096}, {4096, 8192}, {20480, 24576}, {0, 2048}}}};
  Normalize(&r);
  EXPECT_EQ(r, (RangeSet{{1, {{0, 12288}, {20480, 24576}}}}));
  EXPECT_EQ(Sum(r[1]), 12288u + 4096u);
}

TEST(LiveSpaceTest, SubtractLeavesWhatTheOtherSetDoesNotCover) {
  const Ranges a = {{0, 16384}, {20480, 28672}};
  const Ranges b = {{4096, 8192}, {12288, 24576}};
  EXPECT_EQ(Subtract(a, &b),
            (Ranges{{0, 4096}, {8192, 12288}, {24576, 28672}}));
  EXPECT_EQ(Subtract(a, nullptr), a);
  const Ranges all = {{0, 1 << 20}};
  EXPECT_TRUE(Subtract(a, &all).empty());
}

TEST(LiveSpaceTest, FindAndHasPieceIn) {
  const RangeSet r = {{2, {{0, 4096}}}};
  ASSERT_NE(Find(r, 2), nullptr);
  EXPECT_EQ(*Find(r, 2), (Ranges{{0, 4096}}));
  EXPECT_EQ(Find(r, 3), nullptr);
  const ChunkIndexValue v = InSegments({{0, 4096, 2, 0}, {4096, 4096, 5, 0}});
  EXPECT_TRUE(HasPieceIn(v, 5));
  EXPECT_FALSE(HasPieceIn(v, 3));
}

TEST(LiveSpaceTest, UniqueSegmentBytesCountsASharedPieceOnce) {
  // A version and its patch: the patch shares the source's first and last
  // 4 KiB and has its own middle block in segment 9.
  const ChunkIndexValue source = InSegments({{0, 12288, 8, 0}});
  const ChunkIndexValue patched = InSegments(
      {{0, 4096, 8, 0}, {4096, 4096, 9, 40960}, {8192, 4096, 8, 8192}});
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> per_segment;
  EXPECT_EQ(UniqueSegmentBytes({&source, &patched}, &per_segment),
            12288u + 4096u);
  // Per segment: (bytes, end of the last range).
  EXPECT_EQ(per_segment[8], (std::pair<uint64_t, uint64_t>{12288, 12288}));
  EXPECT_EQ(per_segment[9], (std::pair<uint64_t, uint64_t>{4096, 45056}));
  // It adds to what *per_segment held.
  EXPECT_EQ(UniqueSegmentBytes({&patched}, &per_segment), 12288u);
  EXPECT_EQ(per_segment[8].first, 12288u + 8192u);
}

using Change = std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>;

Change Rows(const std::vector<LiveChange::Segment>& segments) {
  Change out;
  for (const auto& s : segments) out.emplace_back(s.seq, s.bytes, s.entries);
  return out;
}

TEST(LiveSpaceTest, ChangeOfAPatchThatReplacesItsSource) {
  // The new version keeps the source's first and last 4 KiB (segment 8)
  // and writes its middle block to segment 9; the source goes.
  const ChunkIndexValue source = InSegments({{0, 12288, 8, 0}});
  const ChunkIndexValue patched = InSegments(
      {{0, 4096, 8, 0}, {4096, 4096, 9, 40960}, {8192, 4096, 8, 8192}});
  const LiveChange c = ChangeOf({}, {&source}, &patched, 1);
  // Segment 8 keeps its entry count (one in, one out) and loses the
  // middle block; segment 9 gains the new block and an entry.
  EXPECT_EQ(Rows(c.added), (Change{{8, 0, 1}, {9, 4096, 1}}));
  EXPECT_EQ(Rows(c.removed), (Change{{8, 4096, 1}}));
  EXPECT_EQ(c.dead, (RangeSet{{8, {{4096, 8192}}}}));
}

TEST(LiveSpaceTest, ChangeOfADeleteOfAVersionAnotherStillShares) {
  // A clone shares every byte of the deleted version: the entry goes, no
  // byte is dead.
  const ChunkIndexValue v = InSegments({{0, 8192, 8, 0}});
  const LiveChange c = ChangeOf({v}, {&v}, nullptr, 0);
  EXPECT_TRUE(c.added.empty());
  EXPECT_EQ(Rows(c.removed), (Change{{8, 0, 1}}));
  EXPECT_TRUE(c.dead.empty());
  // Without the clone, all of it is dead.
  const LiveChange alone = ChangeOf({}, {&v}, nullptr, 0);
  EXPECT_EQ(Rows(alone.removed), (Change{{8, 8192, 1}}));
  EXPECT_EQ(alone.dead, (RangeSet{{8, {{0, 8192}}}}));
}

}  // namespace
}  // namespace stripefs::live_space
