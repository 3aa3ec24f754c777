// Unit tests of FrameAssembler: frames split at every kind of receive
// boundary come out byte for byte, bad headers are refused before any body
// is allocated, and large bodies are received in place.
#include "backend/rpc/frame_assembler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "tests/rpc/test_sessions.h"
#include "tests/support/random_bytes.h"

namespace stripefs::rpc {
namespace {

using testing::Link;
using testing::MakeLink;
using testing::TestKey;

// Deterministic test payload (tests/support/random_bytes.h).
std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  return stripefs::testing::RandomBytes(n, seed);
}

// Feeds `stream` through the assembler, each receive taking at most the
// next size from `sizes` (cycled), like a socket delivering odd segments.
Status Feed(FrameAssembler& a, const std::vector<uint8_t>& stream,
            const std::vector<size_t>& sizes, std::vector<RawFrame>* out,
            size_t* direct_bytes = nullptr) {
  size_t off = 0, i = 0;
  while (off < stream.size()) {
    bool exact = false;
    std::span<uint8_t> buf = a.RecvBuffer(&exact);
    EXPECT_FALSE(buf.empty());
    size_t n =
        std::min({buf.size(), stream.size() - off, sizes[i++ % sizes.size()]});
    std::memcpy(buf.data(), stream.data() + off, n);
    if (exact && direct_bytes) *direct_bytes += n;
    off += n;
    STRIPEFS_RETURN_IF_ERROR(a.Commit(n, out));
  }
  return Status::Ok();
}

struct Sent {
  FrameHeader h;
  std::vector<uint8_t> payload, bulk;
};

TEST(FrameAssemblerTest, FramesSplitAnywhereComeOutExact) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  std::vector<Sent> sent;
  std::vector<uint8_t> stream;
  size_t lens[][2] = {{0, 0},     {1, 0},    {40, 0},         {0, 5000},
                      {300, 100}, {9000, 0}, {17, 70 * 1024}, {5, 1}};
  uint32_t seed = 1;
  for (auto& l : lens) {
    Sent s;
    s.h.type = static_cast<uint16_t>(seed);
    s.h.request_id = seed * 1000;
    s.payload = Bytes(l[0], seed++);
    s.bulk = Bytes(l[1], seed++);
    auto wire = EncodeFrame(lk.tx, s.h, s.payload, s.bulk);
    stream.insert(stream.end(), wire.begin(), wire.end());
    sent.push_back(std::move(s));
  }
  for (std::vector<size_t> sizes :
       {std::vector<size_t>{1}, {7}, {31, 33}, {4096}, {1 << 20}, {3, 60000}}) {
    FrameAssembler a;
    Link v = MakeLink(*key);  // verifies from the first frame again
    std::vector<RawFrame> got;
    ASSERT_TRUE(Feed(a, stream, sizes, &got).ok());
    EXPECT_FALSE(a.mid_frame());
    ASSERT_EQ(got.size(), sent.size()) << "receive size " << sizes[0];
    for (size_t i = 0; i < got.size(); ++i) {
      auto f = std::move(got[i]).Verify(v.rx);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      EXPECT_EQ(f->header.type, sent[i].h.type);
      EXPECT_EQ(f->header.request_id, sent[i].h.request_id);
      EXPECT_EQ(f->payload, sent[i].payload);
      EXPECT_EQ(f->bulk, sent[i].bulk);
    }
  }
}

TEST(FrameAssemblerTest, LargeBulkIsReceivedInPlaceAndGrowsPastFourMiB) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  auto bulk = Bytes((9 << 20) + 123, 9);
  auto wire = EncodeFrame(lk.tx, FrameHeader{}, Bytes(10, 1), bulk);
  FrameAssembler a;
  std::vector<RawFrame> got;
  size_t direct = 0;
  ASSERT_TRUE(Feed(a, wire, {size_t{1} << 20}, &got, &direct).ok());
  ASSERT_EQ(got.size(), 1u);
  // Almost all of the bulk went straight into its vector (only what shared
  // a staging receive with the header, and a tail under kDirectMin, was
  // copied).
  EXPECT_GE(direct, bulk.size() - FrameAssembler::kStageSize -
                        FrameAssembler::kDirectMin);
  auto f = std::move(got[0]).Verify(lk.rx);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->bulk == bulk);
}

// A recycled bulk buffer receives the next frame that fits it, byte for
// byte (the old contents never show); one too small waits for a frame that
// fits, and one over 4 MiB is not kept.
TEST(FrameAssemblerTest, RecycledBulkBufferReceivesTheNextFrame) {
  auto key = TestKey(3);
  Link tx = MakeLink(*key);
  Link rx = MakeLink(*key);
  FrameAssembler a;
  uint32_t seed = 50;
  // Sends one frame with `bulk_len` bytes of bulk through the assembler and
  // returns it verified.
  auto roundtrip = [&](size_t bulk_len) {
    auto bulk = Bytes(bulk_len, seed++);
    auto wire = EncodeFrame(tx.tx, FrameHeader{}, Bytes(10, seed++), bulk);
    std::vector<RawFrame> got;
    EXPECT_TRUE(Feed(a, wire, {size_t{1} << 20}, &got).ok());
    EXPECT_EQ(got.size(), 1u);
    auto f = std::move(got.at(0)).Verify(rx.rx);
    EXPECT_TRUE(f.ok());
    EXPECT_TRUE(f->bulk == bulk);
    // Page-aligned, so chunkd's O_DIRECT write takes it without a copy.
    EXPECT_EQ(
        reinterpret_cast<uintptr_t>(f->bulk.data()) % BufferPool::kBufferAlign,
        0u);
    return std::move(f->bulk);
  };
  AlignedBytes first = roundtrip(256 << 10);
  const uint8_t* mem = first.data();
  a.Recycle(std::move(first));
  AlignedBytes second = roundtrip(256 << 10);
  EXPECT_EQ(second.data(), mem);  // the same buffer, new bytes
  a.Recycle(std::move(second));
  AlignedBytes smaller = roundtrip(100 << 10);  // fits: reused
  EXPECT_EQ(smaller.data(), mem);
  EXPECT_EQ(smaller.size(), size_t{100} << 10);

  FrameAssembler b;
  std::swap(a, b);  // fresh assembler, no spare
  a.Recycle(AlignedBytes(64 << 10));
  AlignedBytes big = roundtrip(256 << 10);  // does not fit
  EXPECT_EQ(big.capacity(), size_t{256} << 10);
  AlignedBytes small = roundtrip(32 << 10);  // the spare fits
  EXPECT_EQ(small.capacity(), size_t{64} << 10);

  a.Recycle(AlignedBytes((4 << 20) + 1));  // over 4 MiB: dropped
  AlignedBytes after = roundtrip(1 << 20);
  EXPECT_EQ(after.capacity(), size_t{1} << 20);
}

TEST(FrameAssemblerTest, ClaimedLengthIsNotAllocatedBeforeBytesArrive) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  FrameHeader h;
  h.bulk_len = kMaxBulk;  // 64 MiB claimed, legal
  uint8_t hdr[kFrameHeaderSize];
  EncodeHeader(h, hdr);
  FrameAssembler a;
  std::vector<RawFrame> got;
  ASSERT_TRUE(
      Feed(a, std::vector<uint8_t>(hdr, hdr + sizeof(hdr)), {32}, &got).ok());
  EXPECT_TRUE(a.mid_frame());
  bool exact = false;
  auto buf = a.RecvBuffer(&exact);
  EXPECT_TRUE(exact);
  EXPECT_LE(buf.size(), size_t{4} << 20);  // first step only, not 64 MiB
}

TEST(FrameAssemblerTest, BadHeadersAreRefusedWithTheirFrameError) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  struct Case {
    FrameHeader h;
    uint32_t magic_xor;
    FrameError want;
  };
  FrameHeader big;
  big.payload_len = kMaxPayload + 1;
  FrameHeader ver;
  ver.version = 1;
  FrameHeader rej;
  rej.flags = kFlagReject;
  std::vector<Case> cases = {{FrameHeader{}, 1, FrameError::kBadMagic},
                             {big, 0, FrameError::kOversize},
                             {ver, 0, FrameError::kBadVersion},
                             {rej, 0, FrameError::kBadMac}};
  for (auto& c : cases) {
    // A good frame first: it must come out even though the next one fails.
    auto stream = EncodeFrame(lk.tx, FrameHeader{}, Bytes(3, 1), {});
    uint8_t hdr[kFrameHeaderSize];
    EncodeHeader(c.h, hdr);
    hdr[0] ^= static_cast<uint8_t>(c.magic_xor);
    stream.insert(stream.end(), hdr, hdr + sizeof(hdr));
    FrameAssembler a;
    std::vector<RawFrame> got;
    Status s = Feed(a, stream, {5000}, &got);
    EXPECT_EQ(FrameErrorOf(s), c.want) << s.ToString();
    EXPECT_EQ(got.size(), 1u);
  }
}

TEST(FrameAssemblerTest, CorruptBodyIsCaughtByVerify) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  auto wire = EncodeFrame(lk.tx, FrameHeader{}, Bytes(100, 1), Bytes(50, 2));
  for (size_t flip : {size_t{40}, size_t{140}, wire.size() - 1}) {
    auto bad = wire;
    bad[flip] ^= 0x10;
    FrameAssembler a;
    std::vector<RawFrame> got;
    ASSERT_TRUE(Feed(a, bad, {13}, &got).ok());
    ASSERT_EQ(got.size(), 1u);
    Link v = MakeLink(*key);
    auto f = std::move(got[0]).Verify(v.rx);
    EXPECT_FALSE(f.ok());
    EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kBadMac);
  }
}

TEST(FrameAssemblerTest, MidFrameTracksPartialFrames) {
  auto key = TestKey(3);
  Link lk = MakeLink(*key);
  auto wire = EncodeFrame(lk.tx, FrameHeader{}, Bytes(20, 1), {});
  FrameAssembler a;
  std::vector<RawFrame> got;
  EXPECT_FALSE(a.mid_frame());
  std::vector<uint8_t> head(wire.begin(), wire.begin() + 10);
  ASSERT_TRUE(Feed(a, head, {10}, &got).ok());
  EXPECT_TRUE(a.mid_frame());
  std::vector<uint8_t> rest(wire.begin() + 10, wire.end());
  ASSERT_TRUE(Feed(a, rest, {100}, &got).ok());
  EXPECT_FALSE(a.mid_frame());
  EXPECT_EQ(got.size(), 1u);
}

}  // namespace
}  // namespace stripefs::rpc
