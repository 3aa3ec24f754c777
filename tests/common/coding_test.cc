// common/coding.h: byte order, round trips, and the bounds-checked reader on
// truncated and malformed input.
#include "common/coding.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace stripefs::coding {
namespace {

TEST(Coding, LittleEndianLayout) {
  std::vector<uint8_t> out;
  PutLe(&out, uint16_t{0x0102});
  PutLe(&out, uint32_t{0x03040506});
  PutLe(&out, uint64_t{0x0708090a0b0c0d0e});
  EXPECT_EQ(
      out, (std::vector<uint8_t>{0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0e, 0x0d,
                                 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07}));
  EXPECT_EQ(LoadLe<uint16_t>(out.data()), 0x0102);
  EXPECT_EQ(LoadLe<uint32_t>(out.data() + 2), 0x03040506u);
  EXPECT_EQ(LoadLe<uint64_t>(out.data() + 6), 0x0708090a0b0c0d0eu);
}

TEST(Coding, BigEndianLayoutSortsNumerically) {
  std::string a, b;
  PutBe(&a, uint64_t{0x00000000000000ff});
  PutBe(&b, uint64_t{0x0000000000000100});
  EXPECT_EQ(a, std::string("\0\0\0\0\0\0\0\xff", 8));
  EXPECT_LT(a, b);  // bytewise order equals numeric order (RocksDB keys)
  EXPECT_EQ(LoadBe<uint64_t>(a.data()), 0xffu);
  std::string c;
  PutBe(&c, uint32_t{0x01020304});
  EXPECT_EQ(c, "\x01\x02\x03\x04");
  EXPECT_EQ(LoadBe<uint32_t>(c.data()), 0x01020304u);
}

TEST(Coding, StoreAndLoadAllOnes) {
  uint8_t b[8];
  StoreLe(b, ~uint64_t{0});
  EXPECT_EQ(LoadLe<uint64_t>(b), ~uint64_t{0});
  StoreBe(b, uint32_t{0xfffffffe});
  EXPECT_EQ(b[3], 0xfe);
  EXPECT_EQ(LoadBe<uint32_t>(b), 0xfffffffeu);
  StoreLe(b, uint16_t{0xff01});
  EXPECT_EQ(LoadLe<uint16_t>(b), 0xff01);
}

TEST(ByteReader, ReadsInOrderAndEndsDone) {
  std::string in;
  PutLe(&in, uint8_t{7});
  PutLe(&in, uint32_t{0xdeadbeef});
  PutBe(&in, uint64_t{42});
  in += "tail";
  ByteReader r(in);
  uint8_t u8 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  std::string_view tail;
  ASSERT_TRUE(r.ReadLe(&u8));
  ASSERT_TRUE(r.ReadLe(&u32));
  ASSERT_TRUE(r.ReadBe(&u64));
  EXPECT_FALSE(r.Done());
  EXPECT_EQ(r.remaining(), 4u);
  ASSERT_TRUE(r.ReadBytes(4, &tail));
  EXPECT_EQ(u8, 7);
  EXPECT_EQ(u32, 0xdeadbeefu);
  EXPECT_EQ(u64, 42u);
  EXPECT_EQ(tail, "tail");
  EXPECT_TRUE(r.Done());
}

// Every prefix shorter than the record fails without reading past the end,
// and the failure latches.
TEST(ByteReader, TruncatedInputFailsAndLatches) {
  std::vector<uint8_t> full;
  PutLe(&full, uint32_t{1});
  PutLe(&full, uint64_t{2});
  for (size_t len = 0; len < full.size(); ++len) {
    // A heap copy of exactly len bytes, so ASan sees any overread.
    std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    ByteReader r(std::span<const uint8_t>(cut.data(), cut.size()));
    uint32_t a = 99;
    uint64_t b = 99;
    bool got_a = r.ReadLe(&a);
    bool got_b = r.ReadLe(&b);
    EXPECT_EQ(got_a, len >= 4) << len;
    EXPECT_FALSE(got_b) << len;
    EXPECT_EQ(b, 99u) << "output untouched on failure, len " << len;
    EXPECT_FALSE(r.ok());
    EXPECT_FALSE(r.Done());
    uint8_t c = 0;
    EXPECT_FALSE(r.ReadLe(&c)) << "failure latches, len " << len;
  }
}

TEST(ByteReader, LengthsBeyondInputFail) {
  const std::string in = "abc";
  ByteReader r(in);
  std::string_view v;
  EXPECT_FALSE(r.ReadBytes(4, &v));
  EXPECT_FALSE(r.ok());
  ByteReader s(in);
  EXPECT_FALSE(s.Skip(SIZE_MAX));
  ByteReader t(in);
  ASSERT_TRUE(t.Skip(3));
  EXPECT_TRUE(t.Done());
  EXPECT_TRUE(t.ReadBytes(0, &v));  // an empty read at the end is fine
  EXPECT_TRUE(v.empty());
}

TEST(ByteReader, FailMarksMalformed) {
  const std::string in(8, '\0');
  ByteReader r(in);
  uint32_t v = 0;
  ASSERT_TRUE(r.ReadLe(&v));
  EXPECT_FALSE(r.Fail());
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.ReadLe(&v));
}

TEST(ByteReader, EmptyInputIsDone) {
  ByteReader r(std::string_view{});
  EXPECT_TRUE(r.Done());
  uint8_t b = 0;
  EXPECT_FALSE(r.ReadLe(&b));
  EXPECT_FALSE(r.Done());
}

}  // namespace
}  // namespace stripefs::coding
