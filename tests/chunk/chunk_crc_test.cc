#include "backend/chunk/chunk_crc.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace stripefs {
namespace {

std::span<const uint8_t> Bytes(const char* s) {
  return {reinterpret_cast<const uint8_t*>(s), std::strlen(s)};
}

TEST(ChunkCrc32c, StandardCheckValue) {
  EXPECT_EQ(ChunkCrc32c(Bytes("123456789")), 0xE3069283u);
}

TEST(ChunkCrc32c, EmptyIsZero) { EXPECT_EQ(ChunkCrc32c({}), 0u); }

TEST(ChunkCrc32c, KnownVectors) {
  // RFC 3720 B.4: 32 bytes of zeros / of 0xFF.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF);
  EXPECT_EQ(ChunkCrc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(ChunkCrc32c(ones), 0x62A8AB43u);
}

TEST(ChunkCrc32c, DetectsSingleBitFlip) {
  std::vector<uint8_t> buf(4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7);
  uint32_t a = ChunkCrc32c(buf);
  buf[1234] ^= 0x10;
  EXPECT_NE(ChunkCrc32c(buf), a);
}

}  // namespace
}  // namespace stripefs
