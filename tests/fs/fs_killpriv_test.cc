// FUSE_HANDLE_KILLPRIV_V2 with StripeFs through a real mount of an embedded
// volume: writes send no GETXATTR(security.capability) each, and the kill
// flags the kernel sends instead clear set-user-ID / set-group-ID in the
// metadata (tests/support/killpriv_checks.h, shared with the MemFs test in
// tests/fuse). Skips loudly without root or /dev/fuse.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdio>
#include <filesystem>

#include "tests/fs/fs_mount.h"
#include "tests/support/fake_inflight.h"
#include "tests/support/killpriv_checks.h"

namespace stripefs::fs {
namespace {

using namespace fuse_abi;  // NOLINT
using testing::FsMount;
using testing::FsMountOptions;
namespace support = stripefs::testing;

class FsKillprivTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (loudly): " << why;
    FsMountOptions o;
    o.mount_options = {"allow_other"};  // the unprivileged writer
    auto m = FsMount::Start(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
    // The fixture's private temp dir holds the mountpoint: let `nobody`
    // traverse it (not list it) to reach the files.
    const std::string parent = std::filesystem::path(m_->mnt()).parent_path();
    ASSERT_EQ(::chmod(parent.c_str(), 0711), 0) << strerror(errno);
    ASSERT_TRUE(m_->session().negotiated().Has(FUSE_HANDLE_KILLPRIV_V2))
        << "kernel did not accept FUSE_HANDLE_KILLPRIV_V2";
  }
  void TearDown() override { m_.reset(); }
  uint64_t Count(uint32_t op) { return m_->session().Stats().per_opcode[op]; }

  std::unique_ptr<FsMount> m_;
};

TEST_F(FsKillprivTest, WritesSendNoCapabilityProbe) {
  constexpr int kWrites = 512;
  auto p = support::CapabilityProbesDuringWrites(
      m_->Path("f"), kWrites, [this](uint32_t op) { return Count(op); });
  EXPECT_LE(p.getxattr, 1 + p.attr_replies);
  EXPECT_LT(p.getxattr, static_cast<uint64_t>(kWrites));
  std::printf("stripefs killpriv v2: %llu GETXATTR for %d writes\n",
              static_cast<unsigned long long>(p.getxattr), kWrites);
}

TEST_F(FsKillprivTest, FlaggedWriteTruncateAndChownDropPrivileges) {
  support::ExpectKillprivV2Contract(m_->mnt());
}

TEST_F(FsKillprivTest, NoCapabilitySurvivesAChown) {
  // A file capability (VFS_CAP_REVISION_2, 20 bytes) set by root is gone
  // from the metadata after a chown. The kernel's own killpriv may remove
  // it before our FATTR_KILL_SUIDGID handling sees it; this checks the
  // outcome, not which side did it.
  const std::string p = m_->Path("cap");
  FILE* f = std::fopen(p.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const uint32_t cap[5] = {0x02000000u, 1u << 10, 0, 0, 0};  // NET_BIND
  ASSERT_EQ(::setxattr(p.c_str(), "security.capability", cap, sizeof(cap), 0),
            0)
      << strerror(errno);
  const uint64_t removes = Count(FUSE_REMOVEXATTR);
  ASSERT_EQ(::chown(p.c_str(), 1, 1), 0);
  // 0 here means the kernel left it to us (FATTR_KILL_SUIDGID).
  std::printf(
      "REMOVEXATTR sent by the kernel during chown: %llu\n",
      static_cast<unsigned long long>(Count(FUSE_REMOVEXATTR) - removes));
  auto v = m_->volume().meta().GetXattr(
      m_->volume().meta().Lookup(kRootId, "cap")->ino, "security.capability");
  EXPECT_EQ(v.status().code(), ENODATA) << "capability survived the chown";
}

// The server's half alone, by direct calls: through a mount the kernel
// removes a capability itself before the flagged request arrives (see the
// REMOVEXATTR count above), so only this shows StripeFs drops it.
TEST_F(FsKillprivTest, FlaggedSetattrAndWriteDropModeBitsAndCapability) {
  const std::string cap(20, '\x01');  // StripeFs does not parse it
  MetaService& meta = m_->volume().meta();
  FILE* f = std::fopen(m_->Path("direct").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto a = meta.Lookup(kRootId, "direct");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const uint64_t ino = a->ino;
  auto privileged = [&] {
    SetAttrRequest req;
    req.mask = kSetMode;
    req.mode = 06775;
    std::vector<ObsoleteStripe> obsolete;
    ASSERT_TRUE(meta.SetAttr(ino, req, &obsolete).ok());
    ASSERT_TRUE(meta.SetXattr(ino, "security.capability", cap, 0).ok());
  };
  auto expect_killed = [&](const char* what) {
    EXPECT_EQ(meta.GetAttr(ino)->mode & 07777, 0775u) << what;
    EXPECT_EQ(meta.GetXattr(ino, "security.capability").status().code(),
              ENODATA)
        << what;
  };

  privileged();
  support::RecordedReply rec;
  support::FakeInFlight setattr(&rec);
  fuse_setattr_in in{};
  in.valid = FATTR_UID | FATTR_KILL_SUIDGID;  // a chown
  in.uid = 1;
  m_->fs().SetAttr(fuse::Replier(&setattr, nullptr), ino, in);
  ASSERT_TRUE(rec.done);
  EXPECT_EQ(rec.error, 0);
  expect_killed("SETATTR FATTR_KILL_SUIDGID");

  privileged();
  rec = {};
  support::FakeInFlight write(&rec);
  fuse::WriteRequest w;
  const uint8_t data[3] = {'a', 'b', 'c'};
  w.in.size = sizeof(data);
  w.in.write_flags = FUSE_WRITE_KILL_SUIDGID;
  w.data = data;
  m_->fs().Write(fuse::Replier(&write, nullptr), ino, w);
  ASSERT_TRUE(rec.done);
  EXPECT_EQ(rec.error, 0);
  expect_killed("WRITE FUSE_WRITE_KILL_SUIDGID");

  privileged();  // without the flag (a caller with CAP_FSETID) nothing goes
  rec = {};
  support::FakeInFlight plain(&rec);
  w.in.write_flags = 0;
  m_->fs().Write(fuse::Replier(&plain, nullptr), ino, w);
  ASSERT_TRUE(rec.done);
  EXPECT_EQ(meta.GetAttr(ino)->mode & 07777, 06775u);
}

}  // namespace
}  // namespace stripefs::fs
