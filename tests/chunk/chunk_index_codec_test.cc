#include "backend/chunk/chunk_index_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ec/crc32c.h"

namespace stripefs {
namespace {

TEST(ChunkIndexCodec, KeyRoundTrip) {
  ChunkId id{0x0102030405060708ull, 0xA0B0C0D0E0F00011ull, 5};
  std::string k = EncodeChunkKey(id, 0xFFFFFFFFFFFFFFFEull);
  ASSERT_EQ(k.size(), kChunkKeySize);
  ChunkId got;
  uint64_t ver = 0;
  ASSERT_TRUE(DecodeChunkKey(k, &got, &ver).ok());
  EXPECT_EQ(got, id);
  EXPECT_EQ(ver, 0xFFFFFFFFFFFFFFFEull);
  EXPECT_EQ(k.substr(0, kChunkIdPrefixSize), EncodeChunkIdPrefix(id));
}

TEST(ChunkIndexCodec, KeysSortInChunkOrder) {
  // Bytewise key order must equal (inode, stripe, index, version) order.
  std::vector<std::pair<ChunkId, uint64_t>> ordered = {
      {{1, 0, 0}, 1},   {{1, 0, 0}, 256},       {{1, 0, 1}, 1},
      {{1, 1, 0}, 1},   {{1, 256, 0}, 1},       {{2, 0, 0}, 1},
      {{256, 0, 0}, 1}, {{1ull << 63, 0, 0}, 1}};
  for (size_t i = 1; i < ordered.size(); ++i) {
    EXPECT_LT(EncodeChunkKey(ordered[i - 1].first, ordered[i - 1].second),
              EncodeChunkKey(ordered[i].first, ordered[i].second))
        << i;
  }
}

TEST(ChunkIndexCodec, ValueRoundTrip) {
  ChunkIndexValue v{0xDEADBEEF, 0x12345678, 3, 0, {}};
  auto got = DecodeChunkValue(EncodeChunkValue(v));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->length, v.length);
  EXPECT_EQ(got->crc32c, v.crc32c);
  EXPECT_EQ(got->flags, v.flags);
}

// The whole-chunk CRC that ComputeBlockCrcs combines from its block CRCs is
// the direct CRC32C, and the block CRCs are those of each block, for random
// lengths (empty, under one block, exact multiples, a partial last block).
TEST(ChunkIndexCodec, WholeCrcCombinedFromBlocksEqualsDirectCrc) {
  std::mt19937 rng(78);
  std::vector<uint8_t> data(size_t{1} << 20);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths = {0, 1, 4095, 4096, 4097, 8192, data.size()};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (data.size() + 1));
  for (size_t len : lengths) {
    uint32_t whole = 0xFFFFFFFF;
    auto crcs = ComputeBlockCrcs(data.data(), len, 12, &whole);
    EXPECT_EQ(whole, ec::Crc32c(data.data(), len)) << "length " << len;
    ASSERT_EQ(crcs.size(), (len + 4095) / 4096) << "length " << len;
    for (size_t b = 0; b < crcs.size(); ++b) {
      const size_t n = std::min<size_t>(4096, len - b * 4096);
      EXPECT_EQ(crcs[b], ec::Crc32c(data.data() + b * 4096, n))
          << "length " << len << " block " << b;
    }
  }
}

TEST(ChunkIndexCodec, BlockCrcValueRoundTripAndFormat1StillReads) {
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  ChunkIndexValue v{10000, 0x1234, 0, 0, {}};
  v.block_shift = 12;
  v.block_crcs = ComputeBlockCrcs(data.data(), data.size(), 12);
  ASSERT_EQ(v.block_crcs.size(), 3u);  // 4096 + 4096 + 1808
  std::string enc = EncodeChunkValue(v);
  EXPECT_EQ(enc.size(), kChunkValueSize + 1 + 3 * 4);
  EXPECT_EQ(static_cast<uint8_t>(enc[0]), kChunkValueFormatBlocks);
  auto got = DecodeChunkValue(enc);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->block_shift, 12);
  EXPECT_EQ(got->block_crcs, v.block_crcs);
  // Every truncation and any extra byte is Corruption; so is a block shift
  // out of range or a CRC count that does not match the length.
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_EQ(DecodeChunkValue(enc.substr(0, n)).status().code(), EBADMSG);
  }
  EXPECT_EQ(DecodeChunkValue(enc + "x").status().code(), EBADMSG);
  std::string bad_shift = enc;
  bad_shift[kChunkValueSize] = 30;
  EXPECT_EQ(DecodeChunkValue(bad_shift).status().code(), EBADMSG);
  // Values written before block CRCs (format 1) still decode, without them.
  auto old = DecodeChunkValue(EncodeChunkValue({77, 5, 0, 0, {}}));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->block_shift, 0);
  EXPECT_TRUE(old->block_crcs.empty());
}

TEST(ChunkIndexCodec, SegmentValueRoundTripAndBounds) {
  std::vector<uint8_t> data(10000, 7);
  ChunkIndexValue v{10000, 0x99, 0, 12, {}};
  v.block_crcs = ComputeBlockCrcs(data.data(), data.size(), 12);
  v.in_segment = true;
  v.pieces = {{0, 10000, 0x1122334455667788ull, 123 * kSegmentAlign}};
  std::string enc = EncodeChunkValue(v);
  EXPECT_EQ(enc.size(), kChunkValueSize + 1 + kChunkSegmentRefSize + 3 * 4);
  EXPECT_EQ(static_cast<uint8_t>(enc[0]), kChunkValueFormatSegment);
  auto got = DecodeChunkValue(enc);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->in_segment);
  EXPECT_EQ(got->pieces, v.pieces);
  EXPECT_EQ(got->block_crcs, v.block_crcs);
  EXPECT_EQ(EncodeChunkValue(*got), enc);
  EXPECT_EQ(SegmentExtentBytes(10000), 3 * kSegmentAlign);
  EXPECT_EQ(SegmentExtentBytes(0), 0u);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_EQ(DecodeChunkValue(enc.substr(0, n)).status().code(), EBADMSG);
  }
  EXPECT_EQ(DecodeChunkValue(enc + "x").status().code(), EBADMSG);
  // A misaligned offset, or one whose extent would wrap, is refused.
  ChunkIndexValue m = v;
  m.pieces[0].segment_offset = 100;
  EXPECT_EQ(DecodeChunkValue(EncodeChunkValue(m)).status().code(), EBADMSG);
  m.pieces[0].segment_offset = UINT64_MAX / kSegmentAlign * kSegmentAlign;
  EXPECT_EQ(DecodeChunkValue(EncodeChunkValue(m)).status().code(), EBADMSG);
  // Format 3 always carries block CRCs.
  std::string no_shift = enc;
  no_shift[kChunkValueSize] = 0;
  EXPECT_EQ(DecodeChunkValue(no_shift).status().code(), EBADMSG);
}

// Format 4: a version made of pieces.
ChunkIndexValue PiecesValue() {
  std::vector<uint8_t> data(10000, 9);
  ChunkIndexValue v{10000, 0x77, 0, 12, {}};
  v.block_crcs = ComputeBlockCrcs(data.data(), data.size(), 12, &v.crc32c);
  v.in_segment = true;
  v.pieces = {{0, 4096, 5, 8 * kSegmentAlign},
              {4096, 4096, 9, 0},
              {8192, 10000 - 8192, 5, 3 * kSegmentAlign}};
  return v;
}

TEST(ChunkIndexCodec, PiecesValueRoundTripAndBounds) {
  const ChunkIndexValue v = PiecesValue();
  const std::string enc = EncodeChunkValue(v);
  EXPECT_EQ(static_cast<uint8_t>(enc[0]), kChunkValueFormatPieces);
  EXPECT_EQ(enc.size(), kChunkValueSize + 1 + 4 + 3 * kChunkPieceSize + 3 * 4);
  auto got = DecodeChunkValue(enc);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->in_segment);
  EXPECT_EQ(got->pieces, v.pieces);
  EXPECT_EQ(got->block_crcs, v.block_crcs);
  EXPECT_EQ(got->crc32c, v.crc32c);
  EXPECT_EQ(EncodeChunkValue(*got), enc);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_EQ(DecodeChunkValue(enc.substr(0, n)).status().code(), EBADMSG);
  }
  EXPECT_EQ(DecodeChunkValue(enc + "x").status().code(), EBADMSG);
  auto refused = [](const ChunkIndexValue& m) {
    return DecodeChunkValue(EncodeChunkValue(m)).status().code() == EBADMSG;
  };
  ChunkIndexValue m = v;
  m.pieces[1].chunk_offset = 4000;  // overlaps, misaligned
  EXPECT_TRUE(refused(m));
  m = v;
  m.pieces[1].chunk_offset = 8192;  // a gap, then an overlap
  EXPECT_TRUE(refused(m));
  m = v;
  m.pieces[2].length -= 1;  // does not cover the chunk
  EXPECT_TRUE(refused(m));
  m = v;
  m.pieces[2].length += 4096;  // past its end
  EXPECT_TRUE(refused(m));
  m = v;
  m.pieces[0].segment_offset = 100;  // misaligned in its segment
  EXPECT_TRUE(refused(m));
  m = v;
  m.pieces[2].segment_offset = UINT64_MAX / kSegmentAlign * kSegmentAlign;
  EXPECT_TRUE(refused(m));  // wraps
  m = v;
  m.pieces[1].length = 0;
  EXPECT_TRUE(refused(m));
  // A piece count larger than the value holds is refused before anything is
  // allocated for it.
  std::string huge = enc;
  huge[kChunkValueSize + 1] = '\x7f';
  EXPECT_EQ(DecodeChunkValue(huge).status().code(), EBADMSG);
  // One whole piece is format 3 only (one encoding per value).
  ChunkIndexValue one = v;
  one.pieces = {{0, 10000, 5, 0}};
  EXPECT_EQ(static_cast<uint8_t>(EncodeChunkValue(one)[0]),
            kChunkValueFormatSegment);
  std::string as4 = enc.substr(0, kChunkValueSize + 1);
  as4[0] = static_cast<char>(kChunkValueFormatPieces);
  for (char c : std::string{0, 0, 0, 1}) as4.push_back(c);
  const std::string piece_and_crcs =
      EncodeChunkValue(one).substr(kChunkValueSize + 1);  // seg, off, crcs
  for (char c : std::string{0, 0, 0, 0, 0, 0, 0x27, 0x10}) as4.push_back(c);
  as4 += piece_and_crcs;
  EXPECT_EQ(as4.size(), kChunkValueSize + 1 + 4 + kChunkPieceSize + 3 * 4);
  EXPECT_EQ(DecodeChunkValue(as4).status().code(), EBADMSG);
  // The whole-chunk CRC combined from the block CRCs is the real one.
  EXPECT_EQ(CombineBlockCrcs(v.block_crcs, v.length, 12), v.crc32c);
}

TEST(ChunkIndexCodec, MalformedIsCorruption) {
  std::string good = EncodeChunkValue({1, 2, 0, 0, {}});
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_EQ(DecodeChunkValue(good.substr(0, n)).status().code(), EBADMSG);
  }
  EXPECT_EQ(DecodeChunkValue(good + "x").status().code(), EBADMSG);
  std::string bad_format = good;
  bad_format[0] = 9;
  EXPECT_EQ(DecodeChunkValue(bad_format).status().code(), EBADMSG);

  ChunkId id;
  uint64_t ver;
  std::string key = EncodeChunkKey({1, 2, 3}, 4);
  EXPECT_EQ(DecodeChunkKey(key.substr(0, 10), &id, &ver).code(), EBADMSG);
  key[0] = 'x';
  EXPECT_EQ(DecodeChunkKey(key, &id, &ver).code(), EBADMSG);
}

TEST(ChunkIndexCodec, PendingRecordRoundTripAndBounds) {
  ChunkIndexValue old;
  old.length = 5000;
  old.block_shift = kChunkCrcBlockShift;
  old.block_crcs = {7, 8};
  old.crc32c = 9;
  old.in_segment = true;
  old.pieces = {{0, 5000, 3, 8192}};
  std::vector<PendingEntry> in(2);
  in[0].id = {1, 2, 3};
  in[0].version = 4;
  in[0].piece = {0, 5000, 7, 4096};
  in[1].id = {5, 6, 7};
  in[1].version = 8;
  in[1].piece = {8192, 100, 9, 0};
  in[1].has_old = true;
  in[1].old = old;
  const std::string rec = EncodePendingRecord(in);
  auto out = DecodePendingRecord(rec);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].id, in[0].id);
  EXPECT_EQ((*out)[0].version, 4u);
  EXPECT_EQ((*out)[0].piece, in[0].piece);
  EXPECT_FALSE((*out)[0].has_old);
  EXPECT_EQ((*out)[1].piece, in[1].piece);
  ASSERT_TRUE((*out)[1].has_old);
  EXPECT_EQ(EncodeChunkValue((*out)[1].old), EncodeChunkValue(old));
  EXPECT_EQ(EncodePendingRecord(*out), rec);
  // Every truncation, and a trailing byte, is Corruption.
  for (size_t n = 0; n < rec.size(); ++n) {
    EXPECT_EQ(DecodePendingRecord(rec.substr(0, n)).status().code(), EBADMSG)
        << n;
  }
  EXPECT_EQ(DecodePendingRecord(rec + "x").status().code(), EBADMSG);
  // A misaligned piece, an empty one, an unknown format.
  std::vector<PendingEntry> bad = {in[0]};
  bad[0].piece.segment_offset = 100;
  EXPECT_EQ(DecodePendingRecord(EncodePendingRecord(bad)).status().code(),
            EBADMSG);
  bad[0] = in[0];
  bad[0].piece.length = 0;
  EXPECT_EQ(DecodePendingRecord(EncodePendingRecord(bad)).status().code(),
            EBADMSG);
  std::string wrong = rec;
  wrong[0] = 2;
  EXPECT_EQ(DecodePendingRecord(wrong).status().code(), EBADMSG);
  // Keys sort after every chunk key and in batch order.
  uint64_t batch = 0;
  ASSERT_TRUE(DecodePendingKey(EncodePendingKey(77), &batch).ok());
  EXPECT_EQ(batch, 77u);
  EXPECT_LT(EncodeChunkKey({~0ull, ~0ull, ~0u}, ~0ull), EncodePendingKey(0));
  EXPECT_LT(EncodePendingKey(1), EncodePendingKey(256));
  EXPECT_EQ(DecodePendingKey("p123", &batch).code(), EBADMSG);
}

}  // namespace
}  // namespace stripefs
