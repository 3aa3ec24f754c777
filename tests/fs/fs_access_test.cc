// Who may use a mount, through the kernel (issue 18, items 5 and 7): a
// root mount is multi-user by default (allow_other + default_permissions;
// -o no_allow_other keeps it private), and POSIX ACLs are enforced -- the
// mode follows an access ACL, a named-user entry grants access, u::---
// denies the owner, chmod rewrites the ACL, and a default ACL is inherited
// by new files and directories in place of the umask. ACLs are set with
// setfacl(1) (the acl package), as a user would. Every test runs on an
// embedded volume and on a local cluster (names end in /embedded,
// /cluster).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "tests/fs/fs_mount.h"
#include "tests/support/killpriv_checks.h"

namespace stripefs::fs::testing {
namespace {

using stripefs::testing::RunAs;
using stripefs::testing::ServerMode;

constexpr uid_t kUser = 4321;   // the one an ACL names
constexpr uid_t kOther = 4322;  // anyone else

// open(O_RDONLY) as `uid`: 0 or the errno.
int ReadAs(uid_t uid, const std::string& path) {
  return RunAs(uid, uid, [&] {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return errno;
    ::close(fd);
    return 0;
  });
}

// setfacl ARGS PATH: its exit code.
int Setfacl(const std::string& args, const std::string& path) {
  const std::string cmd = "setfacl " + args + " '" + path + "'";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Creates `path` with open(O_CREAT, mode) under `mask` as the umask.
mode_t CreateUnder(mode_t mask, const std::string& path, mode_t mode) {
  const mode_t old = ::umask(mask);
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, mode);
  ::umask(old);
  if (fd < 0) return static_cast<mode_t>(-1);
  ::close(fd);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return static_cast<mode_t>(-1);
  return st.st_mode & 07777;
}

class FsAccessTest : public ::testing::TestWithParam<FsBackend> {
 protected:
  void SetUp() override {
    const std::string skip = BackendSkipMessage(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
    if (std::system("command -v setfacl >/dev/null") != 0)
      GTEST_SKIP() << "SKIPPED (loudly): setfacl missing (apt-get install acl)";
    FsMountOptions o;
    o.backend = GetParam();
    Customize(&o);
    auto m = FsMount::Start(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
    // Other users may traverse the fixture's private directory to the mount.
    const std::string parent = std::filesystem::path(m_->mnt()).parent_path();
    ASSERT_EQ(::chmod(parent.c_str(), 0711), 0) << std::strerror(errno);
  }
  void TearDown() override { m_.reset(); }
  virtual void Customize(FsMountOptions*) {}
  std::string P(const std::string& rel) { return m_->Path(rel); }
  void Put(const std::string& rel, mode_t mode) {
    ASSERT_EQ(CreateUnder(0, P(rel), mode), mode) << rel;
  }
  bool AclsNegotiated() {
    return m_->session().negotiated().Has(fuse_abi::FUSE_POSIX_ACL);
  }
  std::unique_ptr<FsMount> m_;
};

TEST_P(FsAccessTest, RootMountIsMultiUserWithPermissionsChecked) {
  Put("shared", 0644);
  EXPECT_EQ(ReadAs(kUser, P("shared")), 0);
  const int w = RunAs(kUser, kUser, [&] {
    int fd = ::open(P("shared").c_str(), O_WRONLY);
    return fd < 0 ? errno : (::close(fd), 0);
  });
  EXPECT_EQ(w, EACCES);  // the kernel still checks the mode
}

class FsNoAllowOtherTest : public FsAccessTest {
  void Customize(FsMountOptions* o) override {
    o->mount_options = {"no_allow_other"};
  }
};

TEST_P(FsNoAllowOtherTest, OnlyTheMountingUserGetsIn) {
  Put("private", 0644);
  EXPECT_EQ(ReadAs(kUser, P("private")), EACCES);
}

TEST_P(FsAccessTest, ModeFollowsTheAccessAcl) {
  ASSERT_TRUE(AclsNegotiated()) << "kernel did not accept FUSE_POSIX_ACL";
  Put("f", 0644);
  ASSERT_EQ(Setfacl("-m u::r-x,g::---,o::---", P("f")), 0);
  struct stat st {};
  ASSERT_EQ(::stat(P("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0500u);
  EXPECT_EQ(ServerMode(P("f")), 0500);
  // An ACL the mode says in full is not kept as an xattr.
  EXPECT_EQ(::getxattr(P("f").c_str(), "system.posix_acl_access", nullptr, 0),
            -1);
  EXPECT_EQ(errno, ENODATA);
}

TEST_P(FsAccessTest, NamedUserEntryGrantsAccessAndChmodMasksIt) {
  ASSERT_TRUE(AclsNegotiated()) << "kernel did not accept FUSE_POSIX_ACL";
  Put("n", 0600);
  EXPECT_EQ(ReadAs(kUser, P("n")), EACCES);
  ASSERT_EQ(Setfacl("-m u:" + std::to_string(kUser) + ":r", P("n")), 0);
  EXPECT_EQ(ServerMode(P("n")), 0640);  // group bits = the mask
  EXPECT_EQ(ReadAs(kUser, P("n")), 0);
  EXPECT_EQ(ReadAs(kOther, P("n")), EACCES);
  // The ACL survives a remount (metadata, not the kernel's cache).
  ASSERT_TRUE(m_->Remount().ok());
  EXPECT_EQ(ReadAs(kUser, P("n")), 0);
  // chmod g-r sets the mask to ---: the named entry no longer grants.
  ASSERT_EQ(::chmod(P("n").c_str(), 0600), 0);
  EXPECT_EQ(ReadAs(kUser, P("n")), EACCES);
  EXPECT_GT(::getxattr(P("n").c_str(), "system.posix_acl_access", nullptr, 0),
            0);
}

TEST_P(FsAccessTest, OwnerEntryWithoutPermissionsDeniesTheOwner) {
  ASSERT_TRUE(AclsNegotiated()) << "kernel did not accept FUSE_POSIX_ACL";
  Put("o", 0644);
  ASSERT_EQ(::chown(P("o").c_str(), kUser, kUser), 0);
  ASSERT_EQ(Setfacl("-m u::---", P("o")), 0);
  EXPECT_EQ(ServerMode(P("o")), 0044);
  EXPECT_EQ(ReadAs(kUser, P("o")), EACCES);
  EXPECT_EQ(ReadAs(kOther, P("o")), 0);
}

TEST_P(FsAccessTest, DefaultAclIsInheritedInPlaceOfTheUmask) {
  ASSERT_TRUE(AclsNegotiated()) << "kernel did not accept FUSE_POSIX_ACL";
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  ASSERT_EQ(Setfacl("-d -m u::r,g::r,o::-", P("d")), 0);
  EXPECT_EQ(CreateUnder(022, P("d/f"), 0666), 0440u);
  // A new directory gets the default ACL as its own default ACL too.
  const mode_t old = ::umask(022);
  ASSERT_EQ(::mkdir(P("d/sub").c_str(), 0777), 0);
  ::umask(old);
  EXPECT_EQ(ServerMode(P("d/sub")), 0440);
  EXPECT_GT(
      ::getxattr(P("d/sub").c_str(), "system.posix_acl_default", nullptr, 0),
      0);
  // The umask does not apply under a default ACL...
  ASSERT_EQ(::mkdir(P("e").c_str(), 0755), 0);
  ASSERT_EQ(
      Setfacl("-d -m u::rw,g::rw,o::rw,u:" + std::to_string(kUser) + ":rw",
              P("e")),
      0);
  EXPECT_EQ(CreateUnder(022, P("e/f"), 0666), 0666u);
  EXPECT_EQ(ReadAs(kUser, P("e/f")), 0);
  EXPECT_GT(::getxattr(P("e/f").c_str(), "system.posix_acl_access", nullptr, 0),
            0);
  // ...and does without one.
  EXPECT_EQ(CreateUnder(022, P("plain"), 0666), 0644u);
}

INSTANTIATE_TEST_SUITE_P(Backend, FsAccessTest,
                         ::testing::Values(FsBackend::kEmbedded,
                                           FsBackend::kCluster),
                         [](const auto& i) { return FsBackendName(i.param); });
INSTANTIATE_TEST_SUITE_P(Backend, FsNoAllowOtherTest,
                         ::testing::Values(FsBackend::kEmbedded,
                                           FsBackend::kCluster),
                         [](const auto& i) { return FsBackendName(i.param); });

}  // namespace
}  // namespace stripefs::fs::testing
