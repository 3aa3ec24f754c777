// The `stripefs` binary end to end: mount (daemon) / stat --json / umount,
// persistence across remounts, and a crash (kill -9 after fsync, lazy
// unmount of the dead mount, remount: fsync'd data intact); its errors:
// out-of-range values, unknown commands, rejected -o options, a corrupted
// metadata store -- each one line or naming the fix, and leaving nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fs/stats_socket.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "fuse/uring_transport.h"
#include "metrics/scrape.h"
#include "tests/fs/fs_mount.h"
#include "tests/support/killpriv_checks.h"
#include "tests/support/run_command.h"

namespace stripefs::fs::testing {
namespace {

std::string Sh(const std::string& cmd, int* rc) {
  auto r = stripefs::testing::RunCommand(cmd + " 2>&1");
  *rc = r.rc;
  return r.out;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (cannot mount here): " << why;
    char tmpl[] = "/tmp/stripefs-cli-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    vol_ = root_ + "/vol";
    mnt_ = root_ + "/mnt";
    std::filesystem::create_directories(mnt_);
  }
  void TearDown() override {
    if (root_.empty()) return;
    // Always: kill a daemon still running and detach the mount.
    std::ifstream pf(RuntimePathsFor(mnt_).pidfile);
    long pid = 0;
    if (pf >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
    if (fuse::IsFuseMountPoint(mnt_)) (void)fuse::UnmountPath(mnt_, true);
    RemoveTree(root_);
  }
  std::string Bin() { return STRIPEFS_BINARY; }
  std::string Mount(int* rc) {
    return Sh("timeout 60 " + Bin() + " mount " + vol_ + " " + mnt_, rc);
  }
  // `mount -o OPTS VOL MNT` (-o first, as with mount(8)).
  std::string MountWith(const std::string& opts, int* rc) {
    return Sh(
        "timeout 60 " + Bin() + " mount -o " + opts + " " + vol_ + " " + mnt_,
        rc);
  }
  std::string Umount(int* rc) {
    return Sh("timeout 120 " + Bin() + " umount " + mnt_, rc);
  }
  std::string root_, vol_, mnt_;
};

void Put(const std::string& path, size_t n, char c, bool fsync) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string d(n, c);
  ASSERT_EQ(::write(fd, d.data(), n), static_cast<ssize_t>(n));
  if (fsync) {
    ASSERT_EQ(::fsync(fd), 0);
  }
  ::close(fd);
}
std::string Get(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_F(CliTest, MountStatUmountRemountCrash) {
  int rc = 0;
  std::string out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(
      out.find("alignment requested: yes (1 MiB), acknowledged by kernel: no"),
      std::string::npos)
      << out;
  Put(mnt_ + "/a", 3 * 1048576 + 5, 'a', false);
  out = Sh(Bin() + " stat --json " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["negotiated"]["alignment_requested"].get<bool>());
  EXPECT_FALSE(j["negotiated"]["alignment_acknowledged"].get<bool>());
  EXPECT_GT(j["writes"]["requests"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["writes"]["bytes"].get<uint64_t>(), 3u * 1048576 + 5);
  out = Sh(Bin() + " stat " + mnt_, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("full-stripe encodes"), std::string::npos) << out;

  out = Sh("timeout 120 " + Bin() + " umount " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_));
  out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(Get(mnt_ + "/a"), std::string(3 * 1048576 + 5, 'a'));

  // Crash: fsync'd data survives kill -9 of the daemon.
  Put(mnt_ + "/b", 2500000, 'b', true);
  std::ifstream pf(RuntimePathsFor(mnt_).pidfile);
  long pid = 0;
  ASSERT_TRUE(pf >> pid);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  for (int i = 0; i < 100 && ::kill(static_cast<pid_t>(pid), 0) == 0; ++i)
    ::usleep(50000);
  out = Sh("timeout 60 " + Bin() + " umount --lazy " + mnt_, &rc);
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_)) << out;
  out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(Get(mnt_ + "/b"), std::string(2500000, 'b'));
  EXPECT_EQ(Get(mnt_ + "/a"), std::string(3 * 1048576 + 5, 'a'));
  out = Sh("timeout 120 " + Bin() + " umount " + mnt_, &rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(CliTest, EnableUringFlagMountsOverUringAndRestoresTheKnob) {
  if (!fuse::UringKnobPresent()) {
    GTEST_SKIP() << "SKIPPED: kernel without FUSE io-uring (no "
                 << fuse::kEnableUringPath << ")";
  }
  // Start from N (restored to whatever it was when the test ends).
  auto off = fuse::ScopedKnob::Set(fuse::kEnableUringPath, "N");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  int rc = 0;
  std::string out = Sh("timeout 60 " + Bin() + " mount " + vol_ + " " + mnt_ +
                           " --enable-uring --transport uring",
                       &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("enable_uring: N -> Y"), std::string::npos) << out;
  EXPECT_EQ(*fuse::ReadKnob(fuse::kEnableUringPath), "Y");
  Put(mnt_ + "/u", 300000, 'u', true);
  EXPECT_EQ(Get(mnt_ + "/u"), std::string(300000, 'u'));
  out = Sh(Bin() + " stat --json " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["negotiated"]["transport"].get<std::string>(), "uring") << out;
  out = Sh("timeout 120 " + Bin() + " umount " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  // The daemon restores the knob as it exits (after the unmount returns).
  std::string now;
  for (int i = 0; i < 100; ++i) {
    now = *fuse::ReadKnob(fuse::kEnableUringPath);
    if (now == "N") break;
    ::usleep(50000);
  }
  EXPECT_EQ(now, "N");
}

// A second mount of a mounted volume says where it is mounted; umount(8), which
// returns before the daemon has closed the volume, followed at once by a mount
// works (the mount waits for the exiting daemon instead of failing on its
// lock).
TEST_F(CliTest, MountedVolumeIsNamedAndUmountThenMountAtOnceWorks) {
  int rc = 0;
  std::string out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string mnt2 = root_ + "/mnt2";
  std::filesystem::create_directories(mnt2);
  out = Sh("timeout 60 " + Bin() + " mount " + vol_ + " " + mnt2, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("is already mounted at " + mnt_), std::string::npos)
      << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt2));
  for (int round = 0; round < 3; ++round) {
    Put(mnt_ + "/f", 300000, static_cast<char>('a' + round), false);
    out = Sh("timeout 60 umount " + mnt_, &rc);
    ASSERT_EQ(rc, 0) << out;
    out = Mount(&rc);
    ASSERT_EQ(rc, 0) << "round " << round << ": " << out;
    EXPECT_EQ(Get(mnt_ + "/f"),
              std::string(300000, static_cast<char>('a' + round)));
  }
  out = Umount(&rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(CliTest, ErrorsNameTheFix) {
  int rc = 0;
  std::string out =
      Sh(Bin() + " mount " + vol_ + " " + root_ + "/missing", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("mkdir -p"), std::string::npos) << out;
  std::filesystem::create_directories(root_ + "/junk");
  std::ofstream(root_ + "/junk/file") << "x";
  out = Sh("timeout 60 " + Bin() + " mount " + root_ + "/junk " + mnt_, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("not empty"), std::string::npos) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_));
}

// Lines of `out` that are not empty.
std::vector<std::string> Lines(const std::string& out) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) nl = out.size();
    if (nl > pos) lines.push_back(out.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

// A failed mount leaves nothing behind: no mount, no daemon (its pid file),
// and no volume directory it created.
void ExpectNothingLeft(const std::string& vol, const std::string& mnt) {
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt)) << mnt;
  EXPECT_FALSE(std::filesystem::exists(vol)) << vol;
  EXPECT_FALSE(std::filesystem::exists(RuntimePathsFor(mnt).pidfile));
}

TEST_F(CliTest, OutOfRangeValuesAreOneLineErrorsBeforeAnyMount) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--dev-threads 100000", "1 to 64"},
      {"--dev-threads 0", "1 to 64"},
      {"--uring-read-workers 65", "0 to 64"},
      {"--uring-read-workers -1", "0 to 64"},
      {"--uring-try-reads maybe", "not in {on,off}"},
      {"--uring-queues 0", "1 to 4096"},
      {"--memory-cap-mib -5", "1 to 1048576"},
      {"--idle-flush-ms -1", "1 to 3600000"},
      {"--frontier-hold-ms -1", "0 to 3600000"},
      {"--max-ratio 101", "0 to 100"},
      {"--k 0", "1 to 31"},
      {"--m 40", "1 to 31"},
  };
  for (const auto& [flag, range] : cases) {
    int rc = 0;
    std::string out =
        Sh("timeout 60 " + Bin() + " mount " + flag + " " + vol_ + " " + mnt_,
           &rc);
    EXPECT_NE(rc, 0) << flag;
    auto lines = Lines(out);
    ASSERT_EQ(lines.size(), 1u) << flag << ":\n" << out;
    EXPECT_NE(lines[0].find(flag.substr(0, flag.find(' '))), std::string::npos)
        << out;
    EXPECT_NE(lines[0].find(range), std::string::npos) << out;
    EXPECT_NE(lines[0].find("--help"), std::string::npos) << out;
    ExpectNothingLeft(vol_, mnt_);
  }
  // Geometry beyond the stripe width, and a bad cell size: the same.
  int rc = 0;
  std::string out = Sh(Bin() + " mount --k 30 --m 5 " + vol_ + " " + mnt_, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(Lines(out).size(), 1u) << out;
  EXPECT_NE(out.find("at most 32"), std::string::npos) << out;
  out = Sh(Bin() + " mount --cell-size 5000 " + vol_ + " " + mnt_, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(Lines(out).size(), 1u) << out;
  EXPECT_NE(out.find("multiple of 4K"), std::string::npos) << out;
  ExpectNothingLeft(vol_, mnt_);
  // More io-uring queues than this machine has CPUs: the range names them.
  const int cpus = fuse::PossibleCpuCount();
  out = Sh(Bin() + " mount --uring-queues " + std::to_string(cpus + 1) + " " +
               vol_ + " " + mnt_,
           &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(Lines(out).size(), 1u) << out;
  EXPECT_NE(out.find("[1, " + std::to_string(cpus) + "]"), std::string::npos)
      << out;
  EXPECT_NE(out.find("one queue per CPU"), std::string::npos) << out;
  ExpectNothingLeft(vol_, mnt_);
}

// allow_other without default_permissions would leave the mount with no
// access control at all (stripefs checks no permissions itself): refused
// before anything is mounted or created (issue 35). Root's mounts are
// allow_other by default, so no_default_permissions alone is refused too;
// with no_allow_other it is the owner's private mount and allowed.
TEST_F(CliTest, NoDefaultPermissionsWithAllowOtherIsRefused) {
  for (const std::string opts :
       {"allow_other,no_default_permissions", "no_default_permissions"}) {
    if (opts == "no_default_permissions" && ::geteuid() != 0) continue;
    int rc = 0;
    std::string out = MountWith(opts, &rc);
    EXPECT_NE(rc, 0) << opts;
    auto lines = Lines(out);
    ASSERT_EQ(lines.size(), 1u) << opts << ":\n" << out;
    EXPECT_NE(lines[0].find("no_allow_other"), std::string::npos) << out;
    ExpectNothingLeft(vol_, mnt_);
  }
  int rc = 0;
  std::string out = MountWith("no_allow_other,no_default_permissions", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("owner only"), std::string::npos) << out;
  Umount(&rc);
  EXPECT_EQ(rc, 0);
}

TEST_F(CliTest, UnknownCommandIsNamedWithWhereTheHelpIs) {
  int rc = 0;
  std::string out = Sh(Bin() + " frobnicate", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_EQ(Lines(out).size(), 1u) << out;
  EXPECT_NE(out.find("unknown command 'frobnicate'"), std::string::npos) << out;
  EXPECT_NE(out.find("stripefs --help"), std::string::npos) << out;
  out = Sh(Bin() + " cluster frobnicate", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("unknown command 'frobnicate'"), std::string::npos) << out;
  EXPECT_NE(out.find("stripefs cluster --help"), std::string::npos) << out;
}

TEST_F(CliTest, RejectedMountOptionShowsTheReasonAndLeavesNothing) {
  int rc = 0;
  std::string out = Sh("timeout 60 " + Bin() + " mount " + vol_ + " " + mnt_ +
                           " -o ro,no_such_option",
                       &rc);
  EXPECT_NE(rc, 0);
  // libfuse's own reason reaches the terminal, not only the daemon log.
  EXPECT_NE(out.find("unknown option"), std::string::npos) << out;
  EXPECT_NE(out.find("no_such_option"), std::string::npos) << out;
  ExpectNothingLeft(vol_, mnt_);
  // An existing empty volume directory stays, and stays empty.
  std::filesystem::create_directories(vol_);
  out = Sh(
      "timeout 60 " + Bin() + " mount -o no_such_option " + vol_ + " " + mnt_,
      &rc);
  EXPECT_NE(rc, 0);
  EXPECT_TRUE(std::filesystem::is_directory(vol_));
  EXPECT_TRUE(std::filesystem::is_empty(vol_)) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_));
}

TEST_F(CliTest, CorruptedMetadataNamesTheRepairAndRepairWorks) {
  int rc = 0;
  std::string out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  Put(mnt_ + "/kept", 1500000, 'k', true);
  out = Sh("timeout 120 " + Bin() + " umount " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  // Overwrite the RocksDB MANIFEST of the metadata store with garbage.
  int manifests = 0;
  for (const auto& e : std::filesystem::directory_iterator(vol_ + "/meta")) {
    if (e.path().filename().string().rfind("MANIFEST-", 0) != 0) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f << std::string(std::filesystem::file_size(e.path()), '\xa5');
    ++manifests;
  }
  ASSERT_GT(manifests, 0);
  out = Mount(&rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("stripefs meta-repair " + vol_ + "/meta"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("backup"), std::string::npos) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_));
  // The named repair works: the volume mounts again with its file.
  out = Sh("timeout 120 " + Bin() + " meta-repair " + vol_ + "/meta", &rc);
  ASSERT_EQ(rc, 0) << out;
  out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(Get(mnt_ + "/kept"), std::string(1500000, 'k'));
  out = Sh("timeout 120 " + Bin() + " umount " + mnt_, &rc);
  EXPECT_EQ(rc, 0) << out;
}

// One mount in /proc/self/mountinfo.
struct MountInfo {
  bool found = false;
  std::string options;        // per mount: "rw,nosuid,relatime"
  std::string fstype;         // "fuse.stripefs"
  std::string source;         // what fsname said
  std::string super_options;  // "rw,lazytime,user_id=0,..."
  bool Has(const std::string& opts, const std::string& o) const {
    return ("," + opts + ",").find("," + o + ",") != std::string::npos;
  }
};

MountInfo MountInfoOf(const std::string& mnt) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  MountInfo m;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string id, parent, dev, root, point, opts;
    ss >> id >> parent >> dev >> root >> point >> opts;
    const size_t dash = line.find(" - ");
    if (point != mnt || dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    m = MountInfo{};
    m.found = true;
    m.options = opts;
    rest >> m.fstype >> m.source >> m.super_options;
  }
  return m;
}

// The daemon of `mnt` (from its pid file), or 0.
pid_t DaemonOf(const std::string& mnt) {
  std::ifstream pf(RuntimePathsFor(mnt).pidfile);
  long pid = 0;
  return pf >> pid ? static_cast<pid_t>(pid) : 0;
}

// After an unmount not made by `stripefs umount`: wait for the daemon to
// write what it buffered and exit (bounded).
bool WaitForExit(pid_t pid) {
  for (int i = 0; pid > 0 && i < 600 && ::kill(pid, 0) == 0; ++i)
    ::usleep(50000);
  return pid <= 0 || ::kill(pid, 0) != 0;
}

TEST_F(CliTest, VfsOptionsReachTheKernel) {
  int rc = 0;
  std::string out = Sh("timeout 60 " + Bin() + " mount " + vol_ + " " + mnt_ +
                           " -o relatime,nodiratime,nosuid,nodev,noexec,"
                           "lazytime",
                       &rc);
  ASSERT_EQ(rc, 0) << out;
  MountInfo m = MountInfoOf(mnt_);
  ASSERT_TRUE(m.found);
  for (const char* o : {"nosuid", "nodev", "noexec", "relatime", "nodiratime"})
    EXPECT_TRUE(m.Has(m.options, o)) << o << " in " << m.options;
  EXPECT_TRUE(m.Has(m.super_options, "lazytime")) << m.super_options;
  out = Umount(&rc);
  ASSERT_EQ(rc, 0) << out;
  // -o before the positional arguments, as with mount(8).
  out = MountWith("strictatime,sync", &rc);
  ASSERT_EQ(rc, 0) << out;
  m = MountInfoOf(mnt_);
  EXPECT_FALSE(m.Has(m.options, "relatime")) << m.options;
  EXPECT_FALSE(m.Has(m.options, "noatime")) << m.options;
  EXPECT_TRUE(m.Has(m.super_options, "sync")) << m.super_options;
  out = Umount(&rc);
  ASSERT_EQ(rc, 0) << out;
  out = MountWith("ro", &rc);
  ASSERT_EQ(rc, 0) << out;
  m = MountInfoOf(mnt_);
  EXPECT_TRUE(m.Has(m.options, "ro")) << m.options;
  EXPECT_LT(::open((mnt_ + "/w").c_str(), O_CREAT | O_WRONLY, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  out = Umount(&rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST_F(CliTest, RootMountIsMultiUserUnlessNoAllowOther) {
  int rc = 0;
  std::string out = Sh(Bin() + " mount --help", &rc);
  EXPECT_NE(out.find("multi-user: allow_other with default_permissions"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("no_allow_other"), std::string::npos) << out;
  ASSERT_EQ(::chmod(root_.c_str(), 0711), 0);
  out = Mount(&rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("access: multi-user (allow_other)"), std::string::npos)
      << out;
  Put(mnt_ + "/shared", 10, 's', true);
  const auto read_as_user = [&] {
    return stripefs::testing::RunAs(4321, 4321, [&] {
      int fd = ::open((mnt_ + "/shared").c_str(), O_RDONLY);
      return fd < 0 ? errno : (::close(fd), 0);
    });
  };
  EXPECT_EQ(read_as_user(), 0);
  out = Umount(&rc);
  ASSERT_EQ(rc, 0) << out;
  out = MountWith("no_allow_other", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(read_as_user(), EACCES);
  out = Umount(&rc);
  EXPECT_EQ(rc, 0) << out;
}

// A user made for one test, removed (with its home) afterwards.
class TestUser {
 public:
  explicit TestUser(std::string name) : name_(std::move(name)) {
    int rc = 0;
    out_ = Sh("useradd -m -s /bin/sh " + name_, &rc);
    created_ = rc == 0;
  }
  ~TestUser() {
    if (!created_) return;
    int rc = 0;
    (void)Sh("userdel -r -f " + name_, &rc);
  }
  bool created() const { return created_; }
  const std::string& why() const { return out_; }
  std::string Home() const { return "/home/" + name_; }
  // `sh -c CMD` as the user (its environment, its home as cwd).
  std::string Run(const std::string& cmd, int* rc) const {
    return Sh("cd " + Home() + " && timeout 120 runuser -u " + name_ +
                  " -- env -u XDG_RUNTIME_DIR sh -c '" + cmd + "'",
              rc);
  }

 private:
  std::string name_, out_;
  bool created_ = false;
};

// rw on /dev/fuse for one user through an ACL entry, removed afterwards
// (where /dev/fuse is 0600, as here, fusermount3 opens it as the user).
class DeviceGrant {
 public:
  explicit DeviceGrant(const std::string& user) : user_(user) {
    int rc = 0;
    out_ = Sh("setfacl -m u:" + user_ + ":rw /dev/fuse", &rc);
    granted_ = rc == 0;
  }
  ~DeviceGrant() {
    int rc = 0;
    if (granted_) (void)Sh("setfacl -x u:" + user_ + " /dev/fuse", &rc);
  }
  bool granted() const { return granted_; }
  const std::string& why() const { return out_; }

 private:
  std::string user_, out_;
  bool granted_ = false;
};

TEST_F(CliTest, RegularUserMountsAVolumeInTheirHome) {
  const std::string name = "sfst" + std::to_string(::getpid());
  TestUser user(name);
  if (!user.created()) {
    GTEST_SKIP() << "SKIPPED (loudly): cannot create a test user: "
                 << user.why();
  }
  const std::string home = user.Home();
  const std::string mount = Bin() + " mount " + home + "/vol " + home + "/mnt";
  int rc = 0;
  user.Run("test -x " + Bin(), &rc);
  if (rc != 0) {
    GTEST_SKIP() << "SKIPPED (loudly): the build tree is not reachable by "
                    "other users: "
                 << Bin()
                 << " (chmod o+x the directories above it to run this test)";
  }
  std::string out = user.Run(mount, &rc);
  EXPECT_NE(out.find("mkdir -p"), std::string::npos) << out;  // names the fix
  out = user.Run("mkdir -p " + home + "/mnt && test -r /dev/fuse", &rc);
  if (rc != 0) {
    // Closed to the user: not refused up front, but the mount path's own
    // reason (libfuse/fusermount3 open it as the user) and the fix.
    out = user.Run(mount, &rc);
    EXPECT_NE(rc, 0);
    EXPECT_EQ(out.find("no usable /dev/fuse"), std::string::npos) << out;
    EXPECT_NE(out.find("failed to open /dev/fuse: Permission denied"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("setfacl -m u:"), std::string::npos) << out;
    EXPECT_FALSE(fuse::IsFuseMountPoint(home + "/mnt"));
  }
  DeviceGrant grant(name);
  ASSERT_TRUE(grant.granted()) << grant.why();
  out = user.Run(mount, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("access: owner only"), std::string::npos) << out;
  EXPECT_TRUE(fuse::IsFuseMountPoint(home + "/mnt"));
  out = user.Run("echo hello > " + home + "/mnt/f && cat " + home + "/mnt/f",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "hello\n");
  out = user.Run(Bin() + " umount " + home + "/mnt", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(home + "/mnt"));
  out = user.Run(mount + " && cat " + home + "/mnt/f && " + Bin() + " umount " +
                     home + "/mnt",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("hello"), std::string::npos) << out;
  if (fuse::IsFuseMountPoint(home + "/mnt"))
    (void)fuse::UnmountPath(home + "/mnt", true);
}

// /sbin/mount.fuse.stripefs -> the built binary, for this test only (mount(8)
// looks for helpers in /sbin, nowhere else). An existing helper that is not
// ours is left alone (the test skips).
class InstalledHelper {
 public:
  explicit InstalledHelper(const std::string& bin) : bin_(bin) {
    char target[PATH_MAX] = {};
    ssize_t n = ::readlink(kPath, target, sizeof(target) - 1);
    if (n > 0) {
      ours_ = std::string(target, static_cast<size_t>(n)) == bin;
      return;  // someone's helper: used if it is ours, never removed
    }
    installed_ = ::symlink(bin.c_str(), kPath) == 0;
    ours_ = installed_;
  }
  ~InstalledHelper() {
    if (installed_) ::unlink(kPath);
  }
  bool usable() const { return ours_; }
  // Why a test that needs the helper skips when it is not usable.
  std::string SkipMessage() const {
    return std::string("SKIPPED (loudly): ") + kPath +
           " exists and is not a link to " + bin_;
  }
  static constexpr const char* kPath = "/sbin/mount.fuse.stripefs";

 private:
  std::string bin_;
  bool installed_ = false, ours_ = false;
};

// mount(8) then umount(8) of `source` at `mnt` with `options`; checks the
// mount table and a file round trip.
void MountCommandRoundTrip(const std::string& source, const std::string& mnt,
                           const std::string& options) {
  int rc = 0;
  std::string out = Sh("timeout 60 mount -t fuse.stripefs " + source + " " +
                           mnt + " -o " + options,
                       &rc);
  ASSERT_EQ(rc, 0) << out;
  MountInfo m = MountInfoOf(mnt);
  ASSERT_TRUE(m.found) << out;
  EXPECT_EQ(m.fstype, "fuse.stripefs");
  EXPECT_EQ(m.source, source);
  EXPECT_TRUE(m.Has(m.options, "nosuid")) << m.options;
  Put(mnt + "/via-mount8", 300000, 'm', true);
  EXPECT_EQ(Get(mnt + "/via-mount8"), std::string(300000, 'm'));
  const pid_t daemon = DaemonOf(mnt);
  out = Sh("timeout 60 umount " + mnt, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_FALSE(fuse::IsFuseMountPoint(mnt));
  EXPECT_TRUE(WaitForExit(daemon)) << "daemon " << daemon << " still running";
}

TEST_F(CliTest, MountCommandAndFstabLineThenUmount) {
  InstalledHelper helper(Bin());
  if (!helper.usable()) GTEST_SKIP() << helper.SkipMessage();
  int rc = 0;
  std::string out = Sh(Bin() + " mkfs " + vol_, &rc);
  ASSERT_EQ(rc, 0) << out;
  MountCommandRoundTrip(vol_, mnt_, "nosuid,relatime,_netdev");
  // An fstab line (mount -T reads another fstab than /etc/fstab).
  const std::string fstab = root_ + "/fstab";
  std::ofstream(fstab) << vol_ << " " << mnt_
                       << " fuse.stripefs _netdev,nofail,nosuid,noatime 0 0\n";
  out = Sh("timeout 60 mount -T " + fstab + " " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  MountInfo m = MountInfoOf(mnt_);
  EXPECT_EQ(m.source, vol_);
  EXPECT_TRUE(m.Has(m.options, "noatime")) << m.options;
  EXPECT_EQ(Get(mnt_ + "/via-mount8"), std::string(300000, 'm'));
  // mount -a over the same fstab sees it mounted and does nothing.
  out = Sh("timeout 60 mount -a -T " + fstab, &rc);
  EXPECT_EQ(rc, 0) << out;
  const pid_t daemon = DaemonOf(mnt_);
  out = Sh("timeout 60 umount " + mnt_, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(WaitForExit(daemon));
}

// -o metrics=HOST:PORT through mount(8): the mount serves /metrics (the
// daemon logs the bound address); a bad value is a one-line error naming
// the fix, and nothing is mounted.
TEST_F(CliTest, MountCommandServesMetricsOption) {
  InstalledHelper helper(Bin());
  if (!helper.usable()) GTEST_SKIP() << helper.SkipMessage();
  int rc = 0;
  std::string out = Sh(Bin() + " mkfs " + vol_, &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* bad : {"metrics=", "metrics=nohostport", "metrics=:9100",
                          "metrics=127.0.0.1:70000"}) {
    out = Sh("timeout 60 mount -t fuse.stripefs " + vol_ + " " + mnt_ +
                 " -o nosuid," + bad,
             &rc);
    EXPECT_NE(rc, 0) << bad;
    EXPECT_NE(out.find("metrics=HOST:PORT"), std::string::npos) << out;
    EXPECT_FALSE(fuse::IsFuseMountPoint(mnt_)) << bad;
  }
  const std::string fstab = root_ + "/fstab";
  std::ofstream(fstab) << vol_ << " " << mnt_
                       << " fuse.stripefs _netdev,nosuid,metrics=127.0.0.1:0 "
                          "0 0\n";
  out = Sh("timeout 60 mount -T " + fstab + " " + mnt_, &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(fuse::IsFuseMountPoint(mnt_));
  Put(mnt_ + "/m", 4096, 'q', true);
  std::string log;
  for (const auto& rp : fs::RuntimePathCandidates(mnt_)) {
    std::ifstream f(rp.log);
    log.assign(std::istreambuf_iterator<char>(f), {});
    if (!log.empty()) break;
  }
  const std::string tag = "metrics on http://";
  const size_t at = log.rfind(tag);
  ASSERT_NE(at, std::string::npos) << log;
  const size_t end = log.find("/metrics", at + tag.size());
  const std::string addr = log.substr(at + tag.size(), end - at - tag.size());
  auto text = metrics::Scrape(addr);
  ASSERT_TRUE(text.ok()) << addr << ": " << text.status().ToString();
  metrics::Exposition e = metrics::ParseExposition(*text);
  EXPECT_EQ(e.bad_lines, 0u);
  EXPECT_GT(e.Sum("stripefs_mount_writes_requests_total"), 0) << *text;
  EXPECT_TRUE(e.Has("stripefs_fuse_request_duration_seconds_count"));
  const pid_t daemon = DaemonOf(mnt_);
  out = Sh("timeout 60 umount " + mnt_, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(WaitForExit(daemon));
}

TEST_F(CliTest, MountCommandMountsAClusterSource) {
  InstalledHelper helper(Bin());
  if (!helper.usable()) GTEST_SKIP() << helper.SkipMessage();
  const std::string skip = BackendSkipMessage(FsBackend::kCluster);
  if (!skip.empty()) GTEST_SKIP() << skip;
  FsMountOptions o;
  o.backend = FsBackend::kCluster;
  auto cluster = FsMount::Start(o);  // a cluster, and one mount of it
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string dir = (*cluster)->volume_dir();
  std::ifstream addr_file(dir + "/metad.addr");
  std::string addr;
  ASSERT_TRUE(std::getline(addr_file, addr));
  int rc = 0;
  // A cluster source needs meta= and key=.
  std::string out =
      Sh("timeout 60 mount -t fuse.stripefs cluster:t " + mnt_, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("meta=HOST:PORT,key=FILE"), std::string::npos) << out;
  MountCommandRoundTrip(
      "cluster:t", mnt_,
      "meta=" + addr + ",key=" + dir + "/cluster.key,nosuid,_netdev");
  // The other client of the cluster sees the file.
  EXPECT_EQ(Get((*cluster)->Path("via-mount8")), std::string(300000, 'm'));
}

}  // namespace
}  // namespace stripefs::fs::testing
