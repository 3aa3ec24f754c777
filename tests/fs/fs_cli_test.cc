// The `stripefs` binary end to end: mount (daemon) / stat --json / umount,
// persistence across remounts, and a crash (kill -9 after fsync, lazy
// unmount of the dead mount, remount: fsync'd data intact); its errors:
// out-of-range values, unknown commands, rejected -o options, a corrupted
// metadata store -- each one line or naming the fix, and leaving nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fs/stats_socket.h"
#include "fuse/fuse_mount.h"
#include "fuse/kernel_knobs.h"
#include "tests/fs/fs_mount.h"
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

}  // namespace
}  // namespace stripefs::fs::testing
