#include "tests/support/killpriv_checks.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fuse/fuse_abi.h"

namespace stripefs::testing {

int RunAs(uid_t uid, gid_t gid, const std::function<int()>& step) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0)
      _exit(255);
    _exit(step() & 0xff);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 255) return -1;
  return WEXITSTATUS(status);
}

int WriteFile(const std::string& path, const char* bytes, size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0) return errno;
  ssize_t w = ::write(fd, bytes, n);
  int err = w == static_cast<ssize_t>(n) ? 0 : (w < 0 ? errno : EIO);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

long ServerMode(const std::string& path, int* err) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), AT_STATX_FORCE_SYNC, STATX_MODE, &st) !=
      0) {
    if (err) *err = errno;
    return -1;
  }
  return st.stx_mode & 07777;
}

ProbeCount CapabilityProbesDuringWrites(const std::string& file, int writes,
                                        const OpcodeCount& count) {
  using namespace fuse_abi;  // NOLINT
  auto attr_replies = [&] {
    return count(FUSE_GETATTR) + count(FUSE_LOOKUP) + count(FUSE_SETATTR) +
           count(FUSE_CREATE);
  };
  ProbeCount p;
  int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  EXPECT_GE(fd, 0) << file << ": " << std::strerror(errno);
  if (fd < 0) return p;
  const uint64_t x0 = count(FUSE_GETXATTR), a0 = attr_replies();
  for (int i = 0; i < writes; ++i) EXPECT_EQ(::write(fd, "x", 1), 1);
  p.getxattr = count(FUSE_GETXATTR) - x0;
  p.attr_replies = attr_replies() - a0;
  EXPECT_EQ(::close(fd), 0);
  return p;
}

namespace {

// A regular file with exactly `mode` (fchmod beats the umask).
void MakeFile(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  EXPECT_EQ(::fchmod(fd, mode), 0) << std::strerror(errno);
  EXPECT_EQ(::close(fd), 0);
  ASSERT_EQ(ServerMode(path), static_cast<long>(mode)) << path;
}

int WriteAsNobody(const std::string& path) {
  return RunAs(kNobodyUid, kNobodyGid,
               [&] { return WriteFile(path, "abc", 3); });
}

}  // namespace

void ExpectKillprivV2Contract(const std::string& dir) {
  const std::string suid = dir + "/kp_suid", sgid = dir + "/kp_sgid_noexec",
                    trunc = dir + "/kp_trunc", chown = dir + "/kp_chown",
                    root = dir + "/kp_root";
  MakeFile(suid, 06777);
  EXPECT_EQ(WriteAsNobody(suid), 0);
  EXPECT_EQ(ServerMode(suid), 0777) << "write by nobody keeps suid/sgid";

  MakeFile(sgid, 06766);  // set-group-ID without g+x: a locking mark
  EXPECT_EQ(WriteAsNobody(sgid), 0);
  EXPECT_EQ(ServerMode(sgid), 02766);

  MakeFile(trunc, 06777);
  EXPECT_EQ(
      RunAs(kNobodyUid, kNobodyGid,
            [&] { return ::truncate(trunc.c_str(), 1) == 0 ? 0 : errno; }),
      0);
  EXPECT_EQ(ServerMode(trunc), 0777) << "truncate by nobody keeps suid/sgid";

  MakeFile(chown, 04755);
  EXPECT_EQ(::chown(chown.c_str(), 1, 1), 0) << std::strerror(errno);
  EXPECT_EQ(ServerMode(chown), 0755) << "chown keeps suid";

  MakeFile(root, 04755);  // root has CAP_FSETID: no kill flag, bits stay
  EXPECT_EQ(WriteFile(root, "x", 1), 0);
  EXPECT_EQ(ServerMode(root), 04755);
}

}  // namespace stripefs::testing
