// Unit tests of the frame codec: round trips, and every class of malformed
// input rejected with its own error, both from bytes and from a socket.
#include "backend/rpc/frame.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "backend/rpc/tcp_socket.h"

namespace stripefs::rpc {
namespace {

std::shared_ptr<const ClusterKey> Key(uint8_t fill) {
  std::array<uint8_t, kClusterKeySize> b;
  b.fill(fill);
  return ClusterKey::FromBytes(b);
}

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

FrameHeader Hdr() {
  FrameHeader h;
  h.type = 65;
  h.flags = kFlagResponse;
  h.request_id = 0x1122334455667788ull;
  return h;
}

TEST(FrameTest, RoundTripsHeaderPayloadAndBulk) {
  auto key = Key(1);
  auto payload = Bytes(100, 3);
  auto bulk = Bytes(70000, 9);
  auto wire = EncodeFrame(*key, Hdr(), payload, bulk);
  EXPECT_EQ(wire.size(), kFrameHeaderSize + 100 + 70000 + kMacSize);
  auto f = DecodeFrame(*key, wire);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->header.type, 65);
  EXPECT_EQ(f->header.flags, kFlagResponse);
  EXPECT_EQ(f->header.request_id, 0x1122334455667788ull);
  EXPECT_EQ(f->header.payload_len, 100u);
  EXPECT_EQ(f->header.bulk_len, 70000u);
  EXPECT_EQ(f->payload, payload);
  EXPECT_EQ(f->bulk, bulk);
}

TEST(FrameTest, EmptyFrameRoundTrips) {
  auto key = Key(2);
  auto f = DecodeFrame(*key, EncodeFrame(*key, Hdr(), {}, {}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->payload.empty());
  EXPECT_TRUE(f->bulk.empty());
}

TEST(FrameTest, EveryTruncationIsRejectedAsTruncated) {
  auto key = Key(1);
  auto wire = EncodeFrame(*key, Hdr(), Bytes(40, 1), Bytes(20, 2));
  for (size_t n = 0; n < wire.size(); ++n) {
    auto f = DecodeFrame(*key, std::span<const uint8_t>(wire.data(), n));
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kTruncated) << n;
  }
}

TEST(FrameTest, EveryFlippedBitIsRejected) {
  auto key = Key(1);
  auto wire = EncodeFrame(*key, Hdr(), Bytes(16, 1), Bytes(16, 2));
  for (size_t i = 0; i < wire.size() * 8; ++i) {
    auto bad = wire;
    bad[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
    auto f = DecodeFrame(*key, bad);
    ASSERT_FALSE(f.ok()) << "bit " << i << " flip accepted";
    EXPECT_NE(FrameErrorOf(f.status()), FrameError::kNone)
        << f.status().ToString();
  }
}

TEST(FrameTest, BadCrcIsRejectedAsBadCrc) {
  auto key = Key(1);
  auto wire = EncodeFrame(*key, Hdr(), Bytes(16, 1), {});
  wire[kFrameHeaderSize + 3] ^= 0x40;  // payload byte
  auto f = DecodeFrame(*key, wire);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), EBADMSG);
  EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kBadCrc);
}

TEST(FrameTest, WrongKeyIsRejectedAsBadMac) {
  auto wire = EncodeFrame(*Key(1), Hdr(), Bytes(16, 1), Bytes(8, 1));
  auto f = DecodeFrame(*Key(2), wire);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), EACCES);
  EXPECT_NE(f.status().message().find("cluster key"), std::string::npos);
}

TEST(FrameTest, TamperedMacIsRejected) {
  auto key = Key(1);
  auto wire = EncodeFrame(*key, Hdr(), Bytes(16, 1), {});
  wire.back() ^= 1;
  auto f = DecodeFrame(*key, wire);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kBadMac);
}

TEST(FrameTest, BadMagicVersionAndFlagsAreRejected) {
  auto key = Key(1);
  auto good = EncodeFrame(*key, Hdr(), Bytes(4, 1), {});
  auto bad = good;
  bad[0] = 'X';
  EXPECT_EQ(FrameErrorOf(DecodeFrame(*key, bad).status()),
            FrameError::kBadMagic);
  FrameHeader h = Hdr();
  h.version = 2;
  auto v2 = EncodeFrame(*key, h, Bytes(4, 1), {});
  auto f = DecodeFrame(*key, v2);
  EXPECT_EQ(f.status().code(), EPROTONOSUPPORT);
  EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kBadVersion);
  h = Hdr();
  h.flags = 0x80;
  EXPECT_EQ(
      FrameErrorOf(DecodeFrame(*key, EncodeFrame(*key, h, {}, {})).status()),
      FrameError::kBadMagic);
}

TEST(FrameTest, OversizeLengthIsRejectedBeforeAllocating) {
  auto key = Key(1);
  FrameHeader h = Hdr();
  h.payload_len = kMaxPayload + 1;
  uint8_t hdr[kFrameHeaderSize];
  EncodeHeader(h, hdr);
  FrameHeader parsed;
  Status s = ParseHeader(hdr, &parsed);
  EXPECT_EQ(s.code(), EMSGSIZE);
  h.payload_len = 0;
  h.bulk_len = 0xFFFFFFFFu;
  EncodeHeader(h, hdr);
  EXPECT_EQ(FrameErrorOf(ParseHeader(hdr, &parsed)), FrameError::kOversize);
  // Only the header arrives: the decoder must refuse without reading on.
  auto f = DecodeFrame(*key, std::span<const uint8_t>(hdr, kFrameHeaderSize));
  EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kOversize);
}

TEST(FrameTest, TrailingBytesAreRejected) {
  auto key = Key(1);
  auto wire = EncodeFrame(*key, Hdr(), Bytes(4, 1), {});
  wire.push_back(0);
  EXPECT_FALSE(DecodeFrame(*key, wire).ok());
}

// Socket path: WriteFrame (gather write) -> ReadFrame.
class SocketPair {
 public:
  SocketPair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    a.Reset(sv[0]);
    b.Reset(sv[1]);
  }
  UniqueFd a, b;
};

TEST(FrameSocketTest, WriteThenReadLargeBulk) {
  auto key = Key(5);
  SocketPair sp;
  auto payload = Bytes(33, 4);
  auto bulk = Bytes(3 << 20, 8);  // larger than the socket buffer
  Status ws;
  std::thread writer([&] {
    ws = WriteFrame(sp.a.get(), *key, Hdr(), payload, bulk,
                    Clock::now() + std::chrono::seconds(30));
  });
  auto f = ReadFrame(sp.b.get(), *key, Clock::now() + std::chrono::seconds(30));
  writer.join();
  ASSERT_TRUE(ws.ok()) << ws.ToString();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->payload, payload);
  EXPECT_EQ(f->bulk, bulk);
}

TEST(FrameSocketTest, CleanCloseIsNotConnAndMidFrameCloseIsTruncated) {
  auto key = Key(5);
  {
    SocketPair sp;
    sp.a.Reset();
    auto f = ReadFrame(sp.b.get(), *key, NoDeadline());
    EXPECT_EQ(f.status().code(), ENOTCONN);
  }
  {
    SocketPair sp;
    auto wire = EncodeFrame(*key, Hdr(), Bytes(100, 1), {});
    ASSERT_EQ(::write(sp.a.get(), wire.data(), 50), 50);
    sp.a.Reset();
    auto f = ReadFrame(sp.b.get(), *key, NoDeadline());
    EXPECT_EQ(FrameErrorOf(f.status()), FrameError::kTruncated);
  }
}

TEST(FrameSocketTest, ReadTimesOutAtDeadline) {
  auto key = Key(5);
  SocketPair sp;
  auto wire = EncodeFrame(*key, Hdr(), Bytes(100, 1), {});
  ASSERT_EQ(::write(sp.a.get(), wire.data(), 10), 10);  // stalls mid-frame
  auto f =
      ReadFrame(sp.b.get(), *key, Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(f.status().code(), ETIMEDOUT);
}

TEST(FrameSocketTest, RejectFrameReportsTheReason) {
  auto key = Key(5);
  SocketPair sp;
  WriteRejectFrame(sp.a.get(), FrameError::kBadMac);
  auto f = ReadFrame(sp.b.get(), *key, Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(f.status().code(), EACCES);
  EXPECT_NE(f.status().message().find("HMAC"), std::string::npos);
}

}  // namespace
}  // namespace stripefs::rpc
