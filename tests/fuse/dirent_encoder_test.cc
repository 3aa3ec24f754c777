#include "fuse/dirent_encoder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT

TEST(DirentEncoder, EntriesAreEightByteAlignedAndRoundTrip) {
  std::vector<uint8_t> buf(4096);
  DirentEncoder enc(buf);
  std::vector<std::string> names = {"a", "bcdefgh", "12345678", "123456789",
                                    std::string(100, 'n')};
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(enc.Add(100 + i, names[i], S_IFREG >> 12, i + 1));
  }
  size_t expect = 0;
  for (auto& n : names) expect += FuseDirentSize(n.size());
  EXPECT_EQ(enc.size(), expect);
  EXPECT_EQ(enc.size() % 8, 0u);
  EXPECT_EQ(FuseDirentSize(1), 32u);
  EXPECT_EQ(FuseDirentSize(9), 40u);
  size_t i = 0;
  ASSERT_TRUE(ForEachDirent(
      enc.bytes(),
      [&](uint64_t ino, std::string_view name, uint32_t type, uint64_t off) {
        EXPECT_EQ(ino, 100 + i);
        EXPECT_EQ(name, names[i]);
        EXPECT_EQ(type, static_cast<uint32_t>(S_IFREG >> 12));
        EXPECT_EQ(off, i + 1);
        ++i;
      }));
  EXPECT_EQ(i, names.size());
}

TEST(DirentEncoder, RefusesWhatDoesNotFitOrIsInvalid) {
  std::vector<uint8_t> buf(60);
  DirentEncoder enc(buf);
  EXPECT_TRUE(enc.Add(1, "first", 8, 1));         // 32 bytes
  EXPECT_FALSE(enc.Add(2, "second-long", 8, 2));  // 40 > 28 left
  EXPECT_EQ(enc.entries(), 1u);
  EXPECT_FALSE(enc.Add(3, "", 8, 3));
  EXPECT_FALSE(enc.Add(3, "a/b", 8, 3));
  EXPECT_EQ(enc.size(), 32u);
}

TEST(DirentPlusEncoder, CarriesEntryAndName) {
  std::vector<uint8_t> buf(1024);
  DirentPlusEncoder enc(buf);
  fuse_entry_out e{};
  e.nodeid = 5;
  e.attr.ino = 5;
  e.attr.mode = S_IFDIR | 0755;
  ASSERT_TRUE(enc.Add(e, "subdir", S_IFDIR >> 12, 9));
  EXPECT_EQ(enc.size(), FuseDirentplusSize(6));
  EXPECT_EQ(enc.size(), 160u);
  int n = 0;
  ASSERT_TRUE(ForEachDirentPlus(
      enc.bytes(), [&](const fuse_entry_out& got, std::string_view name,
                       uint32_t type, uint64_t off) {
        EXPECT_EQ(got.nodeid, 5u);
        EXPECT_EQ(name, "subdir");
        EXPECT_EQ(type, static_cast<uint32_t>(S_IFDIR >> 12));
        EXPECT_EQ(off, 9u);
        ++n;
      }));
  EXPECT_EQ(n, 1);
}

TEST(DirentDecoder, RejectsTruncatedBodies) {
  std::vector<uint8_t> buf(64);
  DirentEncoder enc(buf);
  ASSERT_TRUE(enc.Add(1, "abc", 8, 1));
  auto body = enc.bytes();
  for (size_t n = 1; n < body.size(); ++n) {
    EXPECT_FALSE(ForEachDirent(body.first(n), [](auto, auto, auto, auto) {}))
        << n;
  }
}

}  // namespace
}  // namespace stripefs::fuse
