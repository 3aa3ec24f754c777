// FUSE_HANDLE_KILLPRIV_V2 through a real mount of MemFs: with it the kernel
// stops sending GETXATTR(security.capability) before every write(), and the
// kill flags it sends instead (write and truncate by a caller without
// CAP_FSETID, chown) clear set-user-ID and set-group-ID. Counts come from
// the engine's per-opcode counters. Skips loudly without root or /dev/fuse.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "tests/fuse/mem_fs.h"
#include "tests/fuse/mounted_session.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using testing::MemFs;
using testing::MountedSession;

constexpr uid_t kNobody = 65534;
constexpr int kWrites = 512;

class KillprivMount : public ::testing::Test {
 protected:
  void Mount(bool killpriv_v2) {
    std::string why = testing::MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (loudly): " << why;
    fs_ = std::make_unique<MemFs>();
    SessionOptions o;
    o.transport = TransportChoice::kDev;
    o.init.handle_killpriv_v2 = killpriv_v2;
    MountOptions mo;
    mo.allow_other = true;  // the unprivileged writer below
    auto m = MountedSession::Start(fs_.get(), o, mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
  }
  void TearDown() override {
    m_.reset();  // unmounts, also after a failed assertion
    fs_.reset();
  }
  uint64_t Count(uint32_t opcode) {
    return m_->session().Stats().per_opcode[opcode];
  }
  // Requests whose reply carries attributes: each may clear the kernel's
  // S_NOSEC latch and so allow one more capability probe.
  uint64_t AttrReplies() {
    return Count(FUSE_GETATTR) + Count(FUSE_LOOKUP) + Count(FUSE_SETATTR) +
           Count(FUSE_CREATE);
  }
  // GETXATTRs sent while root writes kWrites single bytes to a new file,
  // and the attribute replies seen meanwhile.
  std::pair<uint64_t, uint64_t> ProbesDuringWrites() {
    int fd = ::open(m_->Path("f").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    EXPECT_GE(fd, 0) << strerror(errno);
    uint64_t x0 = Count(FUSE_GETXATTR), a0 = AttrReplies();
    for (int i = 0; i < kWrites; ++i) EXPECT_EQ(::write(fd, "x", 1), 1);
    uint64_t x1 = Count(FUSE_GETXATTR), a1 = AttrReplies();
    EXPECT_EQ(::close(fd), 0);
    return {x1 - x0, a1 - a0};
  }
  // Mode as the server has it (AT_STATX_FORCE_SYNC skips the kernel cache).
  uint32_t ServerMode(const std::string& rel) {
    struct statx st {};
    EXPECT_EQ(::statx(AT_FDCWD, m_->Path(rel).c_str(), AT_STATX_FORCE_SYNC,
                      STATX_MODE, &st),
              0)
        << strerror(errno);
    return st.stx_mode & 07777;
  }
  void MakeFile(const std::string& rel, mode_t mode) {
    int fd = ::open(m_->Path(rel).c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(::fchmod(fd, mode), 0) << strerror(errno);  // beats the umask
    ASSERT_EQ(::close(fd), 0);
    ASSERT_EQ(ServerMode(rel), mode);
  }
  // Runs `op` on the file as uid/gid nobody (no CAP_FSETID) in a child;
  // returns 0 or the errno it failed with.
  int AsNobody(const std::string& rel, bool truncate) {
    const std::string path = m_->Path(rel);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setresgid(kNobody, kNobody, kNobody) != 0 ||
          ::setresuid(kNobody, kNobody, kNobody) != 0)
        _exit(100);
      if (truncate) _exit(::truncate(path.c_str(), 1) == 0 ? 0 : errno);
      int fd = ::open(path.c_str(), O_WRONLY);
      if (fd < 0) _exit(errno);
      if (::write(fd, "abc", 3) != 3) _exit(errno);
      _exit(::close(fd) == 0 ? 0 : errno);
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    return WEXITSTATUS(status);
  }

  std::unique_ptr<MemFs> fs_;
  std::unique_ptr<MountedSession> m_;
};

TEST_F(KillprivMount, WithoutV2EveryWriteCostsACapabilityProbe) {
  Mount(/*killpriv_v2=*/false);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_FALSE(m_->session().negotiated().Has(FUSE_HANDLE_KILLPRIV_V2));
  auto [probes, attr_replies] = ProbesDuringWrites();
  EXPECT_GE(probes, static_cast<uint64_t>(kWrites)) << attr_replies;
}

TEST_F(KillprivMount, WithV2WritesSendNoCapabilityProbe) {
  Mount(/*killpriv_v2=*/true);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(m_->session().negotiated().Has(FUSE_HANDLE_KILLPRIV_V2))
      << "kernel did not accept FUSE_HANDLE_KILLPRIV_V2";
  auto [probes, attr_replies] = ProbesDuringWrites();
  // One probe latches S_NOSEC; only an attribute reply re-arms it.
  EXPECT_LE(probes, 1 + attr_replies);
  EXPECT_LT(probes, static_cast<uint64_t>(kWrites));
  std::printf("killpriv v2: %llu GETXATTR for %d writes (%llu attr replies)\n",
              static_cast<unsigned long long>(probes), kWrites,
              static_cast<unsigned long long>(attr_replies));
}

TEST_F(KillprivMount, WriteByUnprivilegedCallerClearsSuidAndSgid) {
  Mount(true);
  if (HasFatalFailure() || IsSkipped()) return;
  MakeFile("suid", 06777);
  EXPECT_EQ(AsNobody("suid", /*truncate=*/false), 0);
  EXPECT_EQ(ServerMode("suid"), 0777u);
  // set-group-ID without group execute is a locking mark: it stays.
  MakeFile("sgid_noexec", 06766);
  EXPECT_EQ(AsNobody("sgid_noexec", false), 0);
  EXPECT_EQ(ServerMode("sgid_noexec"), 02766u);
}

TEST_F(KillprivMount, TruncateByUnprivilegedCallerAndChownClearSuid) {
  Mount(true);
  if (HasFatalFailure() || IsSkipped()) return;
  MakeFile("t", 06777);
  EXPECT_EQ(AsNobody("t", /*truncate=*/true), 0);
  EXPECT_EQ(ServerMode("t"), 0777u);
  MakeFile("c", 04755);
  ASSERT_EQ(::chown(m_->Path("c").c_str(), 1, 1), 0) << strerror(errno);
  EXPECT_EQ(ServerMode("c"), 0755u);
}

TEST_F(KillprivMount, RootWriteKeepsSuid) {
  // CAP_FSETID: the kernel sends no kill flag and the bits stay (VFS rule).
  Mount(true);
  if (HasFatalFailure() || IsSkipped()) return;
  MakeFile("r", 04755);
  int fd = ::open(m_->Path("r").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::write(fd, "x", 1), 1);
  EXPECT_EQ(::close(fd), 0);
  EXPECT_EQ(ServerMode("r"), 04755u);
}

}  // namespace
}  // namespace stripefs::fuse
