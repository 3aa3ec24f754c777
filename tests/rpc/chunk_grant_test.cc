// The chunk grant format (chunk_grant.h): encode/decode round trips, every
// truncation and malformed field refused, the MAC binding the identity,
// its salt and the volume, and the GrantedCall envelope's decoder; the
// client's grant cache.
#include "backend/rpc/chunk_grant.h"

#include <gtest/gtest.h>

#include <vector>

#include "backend/rpc/wire_messages.h"
#include "tests/rpc/test_sessions.h"

namespace stripefs::rpc {
namespace {

ChunkGrant Sample() {
  ChunkGrant g;
  g.ops = kGrantAllOps;
  g.inode = 0x0102030405060708;
  g.first_stripe = 2;
  g.last_stripe = 40;
  g.issued_ms = 1'800'000'000'000;
  g.expires_ms = g.issued_ms + kGrantLifetimeMs;
  g.mac.fill(0xa5);
  return g;
}

TEST(ChunkGrantTest, RoundTripsAndRefusesEveryMalformedForm) {
  const ChunkGrant g = Sample();
  const EncodedGrant bytes = EncodeGrant(g);
  ChunkGrant back;
  ASSERT_TRUE(DecodeGrant(bytes, &back));
  EXPECT_EQ(back, g);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(DecodeGrant(std::span(bytes).first(n), &back)) << n;
  std::vector<uint8_t> longer(bytes.begin(), bytes.end());
  longer.push_back(0);
  EXPECT_FALSE(DecodeGrant(longer, &back));
  auto with = [&](size_t at, uint8_t v) {
    EncodedGrant b = bytes;
    b[at] = v;
    return DecodeGrant(b, &back);
  };
  EXPECT_FALSE(with(0, 2));  // version
  EXPECT_FALSE(with(1, 0));  // no ops
  EXPECT_FALSE(with(1, 4));  // unknown op
  for (size_t at = 2; at < 8; ++at) EXPECT_FALSE(with(at, 1)) << at;
  ChunkGrant inverted = g;  // first stripe after the last
  inverted.first_stripe = 41;
  EXPECT_FALSE(DecodeGrant(EncodeGrant(inverted), &back));
}

TEST(ChunkGrantTest, CoversItsInodeStripesAndOpsOnly) {
  ChunkGrant g = Sample();
  g.ops = kGrantRead;
  EXPECT_TRUE(g.Covers({g.inode, 2, 5}, kGrantRead));
  EXPECT_TRUE(g.Covers({g.inode, 40, 0}, kGrantRead));
  EXPECT_FALSE(g.Covers({g.inode, 2, 5}, kGrantWrite));
  EXPECT_FALSE(g.Covers({g.inode, 1, 5}, kGrantRead));
  EXPECT_FALSE(g.Covers({g.inode, 41, 5}, kGrantRead));
  EXPECT_FALSE(g.Covers({g.inode + 1, 2, 5}, kGrantRead));
}

TEST(ChunkGrantTest, MacBindsIdentitySaltVolumeAndEveryField) {
  VolumeId vol{};
  vol.fill(3);
  auto server = testing::TestKey(40);
  auto key = GrantKey::Derive(*server, vol);
  ASSERT_TRUE(key.ok());
  auto alice = server->NewIdentity("client.alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(GrantKey::Derive(*alice, vol).status().code(), EPERM);
  const Caller who{Principal::kClient, "client.alice", alice->salt()};
  ChunkGrant g = Sample();
  key->Sign(&g, who);
  EXPECT_TRUE(key->Verify(g, who));
  Caller other_salt = who;
  other_salt.salt[0] ^= 1;
  EXPECT_FALSE(key->Verify(g, other_salt));
  Caller bob = who;
  bob.entity = "client.bob";
  EXPECT_FALSE(key->Verify(g, bob));
  VolumeId vol2 = vol;
  vol2[15] ^= 1;
  EXPECT_FALSE(GrantKey::Derive(*server, vol2)->Verify(g, who));
  EXPECT_FALSE(GrantKey::Derive(*testing::TestKey(41), vol)->Verify(g, who));
  // Any changed bit of the 80 bytes fails.
  const EncodedGrant bytes = EncodeGrant(g);
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    EncodedGrant b = bytes;
    b[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ChunkGrant changed;
    if (DecodeGrant(b, &changed)) {
      EXPECT_FALSE(key->Verify(changed, who)) << bit;
    }
  }
}

TEST(ChunkGrantTest, GrantedCallDecodesInPlaceAndRefusesMalformed) {
  const EncodedGrant one[] = {EncodeGrant(Sample())};
  auto inner = EncodeRequest<MsgType::kWriteChunk>({{7, 1, 2}, 9});
  std::vector<uint8_t> payload =
      EncodeGrantedHead(static_cast<uint16_t>(MsgType::kWriteChunk), one);
  payload.insert(payload.end(), inner.begin(), inner.end());
  GrantedCall call;
  ASSERT_TRUE(DecodeGrantedCall(payload, &call));
  EXPECT_EQ(call.inner_type, static_cast<uint16_t>(MsgType::kWriteChunk));
  EXPECT_EQ(call.count, 1u);
  EXPECT_EQ(call.grants[0], Sample());
  EXPECT_EQ(call.inner_payload.data(), payload.data() + 4 + kChunkGrantSize);
  EXPECT_TRUE(DecodePayloadChecked(kGrantedCallType, false, payload));
  EXPECT_FALSE(DecodePayloadChecked(kGrantedCallType, true, payload));
  // Every cut inside the head or the grants is refused.
  for (size_t n = 0; n < 4 + kChunkGrantSize; ++n)
    EXPECT_FALSE(DecodeGrantedCall(std::span(payload).first(n), &call)) << n;
  auto with = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> p = payload;
    p[at] = v;
    return DecodeGrantedCall(p, &call);
  };
  EXPECT_FALSE(with(2, 0));  // no grants
  EXPECT_FALSE(with(2, 2));  // more than sent
  EXPECT_FALSE(with(2, static_cast<uint8_t>(kMaxGrantsPerCall + 1)));
  EXPECT_FALSE(with(3, 1));  // reserved
  EXPECT_FALSE(with(4, 9));  // grant version
  EXPECT_EQ(MsgTypeName(kGrantedCallType), std::string("GrantedCall"));
}

TEST(ChunkGrantTest, CacheAsksOncePerInodeUntilInvalidatedAndWritersGetBoth) {
  std::vector<std::pair<uint64_t, uint8_t>> asked;
  ChunkGrantCache cache(
      [&](uint64_t ino,
          uint8_t ops) -> Result<std::pair<EncodedGrant, uint32_t>> {
        asked.emplace_back(ino, ops);
        if (ino == 99) return Status(EROFS, "read-only");
        ChunkGrant g = Sample();
        g.inode = ino;
        g.ops = ops;
        return std::make_pair(EncodeGrant(g), uint32_t{kGrantLifetimeMs});
      });
  ASSERT_TRUE(cache.Get(5, kGrantRead).ok());
  ASSERT_TRUE(cache.Get(5, kGrantRead).ok());
  ASSERT_TRUE(cache.Get(5, kGrantWrite).ok());  // read grant does not do
  ASSERT_TRUE(cache.Get(5, kGrantRead).ok());   // the read+write one does
  cache.Invalidate(5);
  ASSERT_TRUE(cache.Get(5, kGrantRead).ok());
  EXPECT_EQ(cache.Get(99, kGrantWrite).status().code(), EROFS);
  const std::vector<std::pair<uint64_t, uint8_t>> want = {
      {5, kGrantRead}, {5, kGrantAllOps}, {5, kGrantRead}, {99, kGrantAllOps}};
  EXPECT_EQ(asked, want);
  EXPECT_EQ(cache.fetches(), 4u);
}

}  // namespace
}  // namespace stripefs::rpc
