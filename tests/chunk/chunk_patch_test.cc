// The patch-window arithmetic (chunk_patch.h), tested directly: no store,
// no I/O.
#include "backend/chunk/chunk_patch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace stripefs::chunk_patch {
namespace {

constexpr uint64_t kBlock = 4096;

TEST(PatchWindowsTest, RoundsOutToBlocksAndStopsAtTheChunkEnd) {
  const std::vector<PatchRange> ranges = {{100, 10}, {9000, 100}};
  EXPECT_EQ(PatchWindows(ranges, kBlock, 10000),
            (std::vector<PatchRange>{{0, 4096}, {8192, 10000 - 8192}}));
}

TEST(PatchWindowsTest, MergesWindowsThatTouchOrShareABlock) {
  // [4000, 4100) and [4200, 4300) share block 1; [8200, 8300) starts the
  // block right after the first window ends, so it merges too.
  const std::vector<PatchRange> ranges = {
      {4000, 100}, {4200, 100}, {8200, 100}, {20000, 1}};
  EXPECT_EQ(PatchWindows(ranges, kBlock, 1 << 20),
            (std::vector<PatchRange>{{0, 12288}, {16384, 4096}}));
}

TEST(PatchWindowsTest, AnAlignedRangeIsItsOwnWindow) {
  const std::vector<PatchRange> ranges = {{8192, 8192}};
  EXPECT_EQ(PatchWindows(ranges, kBlock, 65536), ranges);
}

TEST(PiecesOutsideTest, CutsTheWindowsOutOfEachPiece) {
  // Two pieces: chunk [0, 16384) at segment 7 offset 0, chunk
  // [16384, 32768) at segment 9 offset 65536.
  const std::vector<ChunkPiece> pieces = {{0, 16384, 7, 0},
                                          {16384, 16384, 9, 65536}};
  // A window inside the first piece and one across the boundary.
  const std::vector<PatchRange> windows = {{4096, 4096}, {12288, 8192}};
  EXPECT_EQ(PiecesOutside(pieces, windows),
            (std::vector<ChunkPiece>{{0, 4096, 7, 0},
                                     {8192, 4096, 7, 8192},
                                     {20480, 12288, 9, 65536 + 4096}}));
}

TEST(PiecesOutsideTest, AWindowOverEverythingKeepsNothing) {
  const std::vector<ChunkPiece> pieces = {{0, 8192, 1, 0}};
  EXPECT_TRUE(PiecesOutside(pieces, {{0, 8192}}).empty());
  EXPECT_EQ(PiecesOutside(pieces, {}), pieces);
}

TEST(BytesPerBlockTest, CountsTheCoveredBytesOfEachWindowBlock) {
  const std::vector<PatchRange> ranges = {{100, 10}, {4096, 4096}, {9000, 5}};
  const std::vector<PatchRange> windows = PatchWindows(ranges, kBlock, 1 << 20);
  ASSERT_EQ(windows, (std::vector<PatchRange>{{0, 12288}}));
  // Block 0: 10 bytes; block 1: all of it; block 2: 5 bytes. Only blocks
  // 0 and 2 are partly covered, so only they are read from the source.
  EXPECT_EQ(BytesPerBlock(ranges, windows, kBlock),
            (std::vector<uint32_t>{10, 4096, 5}));
}

TEST(BytesPerBlockTest, BlocksOfSeveralWindowsAreNumberedBackToBack) {
  const std::vector<PatchRange> ranges = {{0, 1}, {40960, 4097}};
  const std::vector<PatchRange> windows = PatchWindows(ranges, kBlock, 1 << 20);
  ASSERT_EQ(windows, (std::vector<PatchRange>{{0, 4096}, {40960, 8192}}));
  EXPECT_EQ(BytesPerBlock(ranges, windows, kBlock),
            (std::vector<uint32_t>{1, 4096, 1}));
}

TEST(ScatterIntoWindowsTest, PutsEachRangeAtItsPlaceInTheWindows) {
  const std::vector<PatchRange> ranges = {{10, 3}, {8192 + 5, 2}};
  const std::vector<PatchRange> windows = PatchWindows(ranges, kBlock, 1 << 20);
  ASSERT_EQ(windows, (std::vector<PatchRange>{{0, 4096}, {8192, 4096}}));
  const std::vector<uint8_t> bytes = {1, 2, 3, 4, 5};
  std::vector<uint8_t> out(8192, 0xee);
  ScatterIntoWindows(ranges, bytes, windows, out.data());
  EXPECT_EQ(out[9], 0xee);
  EXPECT_EQ(out[10], 1);
  EXPECT_EQ(out[12], 3);
  EXPECT_EQ(out[13], 0xee);
  // The second window starts at byte 4096 of `out`.
  EXPECT_EQ(out[4096 + 4], 0xee);
  EXPECT_EQ(out[4096 + 5], 4);
  EXPECT_EQ(out[4096 + 6], 5);
  EXPECT_EQ(out[4096 + 7], 0xee);
}

}  // namespace
}  // namespace stripefs::chunk_patch
