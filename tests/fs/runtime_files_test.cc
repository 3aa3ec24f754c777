// Runtime files of a mount daemon (issue 35, hole 5): the private runtime
// directory, the pid and log files, and the bounded stats client. Another
// local user who prepares the directory or plants symlinks in it must not
// get a victim's file truncated or written, and a fake stats socket must
// not hang or bloat `stripefs stat`.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "fs/stats_socket.h"

namespace stripefs::fs {
namespace {

namespace sfs = std::filesystem;
constexpr uid_t kNobody = 65534;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class RuntimeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-runtime-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    victim_ = root_ + "/victim";
    std::ofstream(victim_) << "precious\n";
  }
  void TearDown() override { sfs::remove_all(root_); }
  void ExpectVictimUntouched() {
    EXPECT_EQ(Slurp(victim_), "precious\n");
    struct stat st {};
    ASSERT_EQ(::lstat(victim_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
  }
  std::string root_, victim_;
};

// The attack of issue 35: another user pre-creates the runtime directory
// with the pid file as a symlink to the victim's file. The directory is
// refused (not the user's), so nothing is written through it.
TEST_F(RuntimeFilesTest, DirectoryPreparedByAnotherUserIsRefused) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to make a directory owned by another uid";
  const std::string dir = root_ + "/stripefs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), (dir + "/m.pid").c_str()), 0);
  ASSERT_EQ(::lchown((dir + "/m.pid").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0);
  Status s = EnsureRuntimeDir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("belongs to uid 65534"), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("rm -r " + dir), std::string::npos);
  ExpectVictimUntouched();
}

TEST_F(RuntimeFilesTest, SymlinkedOrOpenDirectoryIsRefusedAndMissingIsMadePrivate) {
  const std::string real = root_ + "/real";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  const std::string link = root_ + "/link";
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  Status s = EnsureRuntimeDir(link);
  EXPECT_EQ(s.code(), EPERM) << s.ToString();
  EXPECT_NE(s.message().find("symlink"), std::string::npos);

  ASSERT_EQ(::chmod(real.c_str(), 0755), 0);
  s = EnsureRuntimeDir(real);
  EXPECT_EQ(s.code(), EPERM) << s.ToString();
  EXPECT_NE(s.message().find("chmod 700 " + real), std::string::npos);

  const std::string fresh = root_ + "/fresh/stripefs";  // parent missing too
  ASSERT_TRUE(EnsureRuntimeDir(fresh).ok());
  struct stat st {};
  ASSERT_EQ(::lstat(fresh.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(EnsureRuntimeDir(fresh).ok());  // again: as it is
}

// In the user's own directory, a planted pid-file symlink is replaced (the
// new file renamed over it), never followed; a planted log symlink is
// refused. Before issue 35 the pid file was written through std::ofstream
// (truncating the victim) and the log opened without O_NOFOLLOW.
TEST_F(RuntimeFilesTest, PlantedPidAndLogSymlinksLeaveTheTargetUntouched) {
  const std::string dir = root_ + "/stripefs";
  ASSERT_TRUE(EnsureRuntimeDir(dir).ok());
  const std::string pid = dir + "/m.pid", log = dir + "/m.log";
  ASSERT_EQ(::symlink(victim_.c_str(), pid.c_str()), 0);
  ASSERT_EQ(::symlink(victim_.c_str(), log.c_str()), 0);
  ASSERT_TRUE(WritePidFile(pid).ok());
  ExpectVictimUntouched();
  struct stat st {};
  ASSERT_EQ(::lstat(pid.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(Slurp(pid), std::to_string(::getpid()) + "\n");
  auto fd = OpenLogFile(log);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), ELOOP);
  ExpectVictimUntouched();
  // Without the link, the log is a private file of ours, appended to.
  ASSERT_EQ(::unlink(log.c_str()), 0);
  fd = OpenLogFile(log);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_EQ(::write(*fd, "x\n", 2), 2);
  ::close(*fd);
  ASSERT_EQ(::lstat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A user with neither XDG_RUNTIME_DIR, nor /run/user/UID, nor HOME gets no
// runtime directory (an error naming the fix), never /tmp/stripefs-UID.
TEST_F(RuntimeFilesTest, NoPredictableTmpFallback) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run as a user without a runtime dir";
  if (sfs::exists("/run/user/" + std::to_string(kNobody)))
    GTEST_SKIP() << "/run/user/65534 exists here";
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(p[0]);
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(2);
    ::unsetenv("XDG_RUNTIME_DIR");
    ::unsetenv("HOME");
    const RuntimePaths rp = RuntimePathsFor("/mnt/x");
    const std::string out =
        rp.dir + "\n" + EnsureRuntimeDir(rp.dir).message() + "\n";
    (void)!::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) got.append(buf, n);
  ::close(p[0]);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(got.find("/tmp"), std::string::npos) << got;
  EXPECT_NE(got.find("XDG_RUNTIME_DIR"), std::string::npos) << got;
}

// A unix socket at `path` served by `serve(client fd)` on a thread.
class FakeStatsSocket {
 public:
  FakeStatsSocket(const std::string& path, std::function<void(int)> serve)
      : serve_(std::move(serve)) {
    fd_.Reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)),
              0);
    EXPECT_EQ(::listen(fd_.get(), 4), 0);
    thread_ = std::thread([this] {
      UniqueFd c(::accept(fd_.get(), nullptr, nullptr));
      if (c.valid()) serve_(c.get());
    });
  }
  ~FakeStatsSocket() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    thread_.join();
  }

 private:
  std::function<void(int)> serve_;
  UniqueFd fd_;
  std::thread thread_;
};

TEST_F(RuntimeFilesTest, StatsClientBoundsItsWaitAndItsRead) {
  {
    // Accepts, then says nothing until the client has given up.
    std::atomic<bool> given_up{false};
    FakeStatsSocket silent(root_ + "/silent.sock", [&](int) {
      for (int i = 0; i < 3000 && !given_up; ++i) ::usleep(10000);
    });
    auto r = FetchStats(root_ + "/silent.sock", std::chrono::milliseconds(300));
    given_up = true;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ETIMEDOUT) << r.status().ToString();
  }
  {
    // Sends without end.
    FakeStatsSocket flood(root_ + "/flood.sock", [](int c) {
      std::string junk(65536, '{');
      for (int i = 0; i < 1000; ++i)
        if (::send(c, junk.data(), junk.size(), MSG_NOSIGNAL) <= 0) break;
    });
    auto r = FetchStats(root_ + "/flood.sock", std::chrono::seconds(60),
                        1u << 20);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), EMSGSIZE) << r.status().ToString();
  }
  {
    FakeStatsSocket good(root_ + "/good.sock", [](int c) {
      (void)!::send(c, "{}\n", 3, MSG_NOSIGNAL);
    });
    auto r = FetchStats(root_ + "/good.sock");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "{}\n");
  }
}

}  // namespace
}  // namespace stripefs::fs
