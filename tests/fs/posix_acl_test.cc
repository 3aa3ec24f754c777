// PosixAcl (fs/posix_acl.h) alone: decoding the kernel's xattr bytes (built
// by hand here, in the layout of uapi linux/posix_acl_xattr.h), the
// validity rules, and the mode rules of the kernel's fs/posix_acl.c.
#include "fs/posix_acl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace stripefs::fs {
namespace {

using namespace fuse_abi;  // NOLINT

struct E {
  uint16_t tag, perm;
  uint32_t id;
};

// Little-endian bytes of a version-2 ACL (`version` to break it).
std::vector<uint8_t> Bytes(const std::vector<E>& es, uint32_t version = 2) {
  std::vector<uint8_t> b;
  auto put = [&b](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(version, 4);
  for (const E& e : es) {
    put(e.tag, 2);
    put(e.perm, 2);
    put(e.id, 4);
  }
  return b;
}

constexpr uint32_t kU = kAclUndefinedId;

TEST(PosixAclTest, ParsesAndSerializesTheKernelLayout) {
  const auto b = Bytes({{kAclUserObj, 6, kU},
                        {kAclUser, 4, 1000},
                        {kAclUser, 7, 1001},
                        {kAclGroupObj, 4, kU},
                        {kAclGroup, 2, 50},
                        {kAclMask, 6, kU},
                        {kAclOther, 0, kU}});
  auto acl = PosixAcl::Parse(b);
  ASSERT_TRUE(acl.ok()) << acl.status().ToString();
  ASSERT_EQ(acl->entries().size(), 7u);
  EXPECT_EQ(acl->entries()[2], (AclEntry{kAclUser, 7, 1001}));
  EXPECT_EQ(acl->Serialize(), std::string(b.begin(), b.end()));
  EXPECT_FALSE(acl->EquivalentToMode());
  // Group bits come from the mask; type and setgid bits are kept.
  EXPECT_EQ(acl->ModeWithAcl(S_IFREG | S_ISGID | 0777),
            uint32_t{S_IFREG | S_ISGID | 0660});
}

TEST(PosixAclTest, RejectsMalformedAndInvalidAcls) {
  const std::vector<E> base = {
      {kAclUserObj, 6, kU}, {kAclGroupObj, 4, kU}, {kAclOther, 4, kU}};
  EXPECT_TRUE(PosixAcl::Parse(Bytes(base)).ok());
  const std::vector<std::vector<uint8_t>> bad = {
      {},              // no header
      {2, 0, 0},       // short header
      Bytes(base, 1),  // version
      [&] {            // partial entry
        auto b = Bytes(base);
        b.pop_back();
        return b;
      }(),
      Bytes({{kAclUserObj, 6, kU}, {kAclOther, 4, kU}}),  // no group
      Bytes({{kAclUserObj, 6, kU},
             {kAclUserObj, 6, kU},
             {kAclGroupObj, 4, kU},
             {kAclOther, 4, kU}}),  // repeated owner
      Bytes({{kAclGroupObj, 4, kU},
             {kAclUserObj, 6, kU},
             {kAclOther, 4, kU}}),  // out of order
      Bytes({{kAclUserObj, 6, kU},
             {kAclUser, 4, 7},
             {kAclGroupObj, 4, kU},
             {kAclOther, 4, kU}}),  // named entry without a mask
      Bytes({{kAclUserObj, 6, kU},
             {kAclUser, 4, 7},
             {kAclUser, 4, 7},
             {kAclGroupObj, 4, kU},
             {kAclMask, 4, kU},
             {kAclOther, 4, kU}}),  // repeated uid
      Bytes({{kAclUserObj, 8, kU},
             {kAclGroupObj, 4, kU},
             {kAclOther, 4, kU}}),  // perm bit beyond rwx
      Bytes({{kAclUserObj, 6, kU},
             {0x40, 4, kU},
             {kAclGroupObj, 4, kU},
             {kAclOther, 4, kU}}),  // unknown tag
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto acl = PosixAcl::Parse(bad[i]);
    EXPECT_FALSE(acl.ok()) << "case " << i;
    if (!acl.ok()) {
      EXPECT_EQ(acl.status().code(), EINVAL) << "case " << i;
    }
  }
}

TEST(PosixAclTest, ThreeEntriesAreTheModeItself) {
  auto acl = PosixAcl::Parse(
      Bytes({{kAclUserObj, 5, kU}, {kAclGroupObj, 0, kU}, {kAclOther, 0, kU}}));
  ASSERT_TRUE(acl.ok());
  EXPECT_TRUE(acl->EquivalentToMode());
  EXPECT_EQ(acl->ModeWithAcl(S_IFREG | 0644), uint32_t{S_IFREG | 0500});
  EXPECT_EQ(PosixAcl::FromMode(0751).ModeWithAcl(0), 0751u);
}

TEST(PosixAclTest, ChmodRewritesOwnerMaskAndOther) {
  auto acl = PosixAcl::Parse(Bytes({{kAclUserObj, 7, kU},
                                    {kAclUser, 7, 1000},
                                    {kAclGroupObj, 5, kU},
                                    {kAclMask, 7, kU},
                                    {kAclOther, 5, kU}}));
  ASSERT_TRUE(acl.ok());
  acl->Chmod(0640);
  EXPECT_EQ(acl->entries()[0].perm, 6);  // owner
  EXPECT_EQ(acl->entries()[1].perm, 7);  // named entries stay
  EXPECT_EQ(acl->entries()[2].perm, 5);  // group: the mask moved instead
  EXPECT_EQ(acl->entries()[3].perm, 4);  // mask
  EXPECT_EQ(acl->entries()[4].perm, 0);  // other
  auto plain = PosixAcl::FromMode(0777);
  plain.Chmod(0604);
  EXPECT_EQ(plain.ModeWithAcl(0), 0604u);  // no mask: the group entry
}

TEST(PosixAclTest, CreateMasksBothWays) {
  // Default ACL u::r,g::r,o::- on a 0666 create: 0440 (issue 18).
  auto def = PosixAcl::Parse(
      Bytes({{kAclUserObj, 4, kU}, {kAclGroupObj, 4, kU}, {kAclOther, 0, kU}}));
  ASSERT_TRUE(def.ok());
  uint32_t mode = S_IFREG | 0666;
  def->CreateMask(&mode);
  EXPECT_EQ(mode, uint32_t{S_IFREG | 0440});
  // With a mask, the mask (not the group entry) meets the mode's group bits.
  auto named = PosixAcl::Parse(Bytes({{kAclUserObj, 7, kU},
                                      {kAclUser, 7, 1000},
                                      {kAclGroupObj, 7, kU},
                                      {kAclMask, 7, kU},
                                      {kAclOther, 7, kU}}));
  ASSERT_TRUE(named.ok());
  mode = S_IFREG | 0640;
  named->CreateMask(&mode);
  EXPECT_EQ(mode, uint32_t{S_IFREG | 0640});
  EXPECT_EQ(named->entries()[0].perm, 6);
  EXPECT_EQ(named->entries()[1].perm, 7);  // named entries are not masked
  EXPECT_EQ(named->entries()[2].perm, 7);
  EXPECT_EQ(named->entries()[3].perm, 4);
  EXPECT_EQ(named->entries()[4].perm, 0);
}

}  // namespace
}  // namespace stripefs::fs
