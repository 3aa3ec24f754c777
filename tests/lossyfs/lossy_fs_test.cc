// LossyFs's rules, each proved through a real mount: what fsync, fdatasync,
// O_DSYNC, directory fsync and sync keep across a simulated power cut, what
// a cut drops, and where it tears a write. Every test mounts a fresh LossyFs
// and always unmounts (MountedSession, RAII). Skips loudly without /dev/fuse
// or root. The torn-write seed is printed; LOSSYFS_SEED=<n> replays one.
#include "tests/lossyfs/lossy_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "tests/fuse/mounted_session.h"

namespace stripefs::lossyfs {
namespace {

using fuse::testing::MountedSession;

uint64_t SeedFromEnv() {
  const char* s = std::getenv("LOSSYFS_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261207;
}

class LossyFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = fuse::testing::MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "lossyfs needs a real mount: " << why;
    seed_ = SeedFromEnv();
    std::printf("lossyfs seed %llu (replay: LOSSYFS_SEED=%llu)\n",
                static_cast<unsigned long long>(seed_),
                static_cast<unsigned long long>(seed_));
    fs_ = std::make_unique<LossyFs>(seed_);
    fuse::MountOptions mo;
    mo.fsname = "lossyfs";
    mo.subtype = "lossyfs";
    auto m = MountedSession::Start(fs_.get(),
                                   LossyFs::SessionOptionsForLossyFs(), mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mount_ = std::move(*m);
  }
  void TearDown() override {
    mount_.reset();  // unmounts before the file system goes
    fs_.reset();
  }

  std::string P(const std::string& rel) const { return mount_->Path(rel); }

  // Writes `data` at `offset` through one open(flags) + pwrite; `sync` is
  // none, "fsync" or "fdatasync" before the close.
  void WriteAt(const std::string& rel, const std::string& data, off_t offset,
               int flags = 0, const std::string& sync = "") {
    int fd = ::open(P(rel).c_str(), O_WRONLY | O_CREAT | flags, 0644);
    ASSERT_GE(fd, 0) << rel << ": " << std::strerror(errno);
    ASSERT_EQ(::pwrite(fd, data.data(), data.size(), offset),
              static_cast<ssize_t>(data.size()))
        << std::strerror(errno);
    if (sync == "fsync") {
      ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
    }
    if (sync == "fdatasync") {
      ASSERT_EQ(::fdatasync(fd), 0) << std::strerror(errno);
    }
    ASSERT_EQ(::close(fd), 0);
  }
  void FsyncPath(const std::string& rel, bool dir) {
    int fd = ::open(P(rel).c_str(), dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    ASSERT_GE(fd, 0) << rel << ": " << std::strerror(errno);
    ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
    ::close(fd);
  }
  // The file's content, or nullopt if it does not exist.
  std::optional<std::string> Read(const std::string& rel) {
    int fd = ::open(P(rel).c_str(), O_RDONLY);
    if (fd < 0) {
      EXPECT_EQ(errno, ENOENT) << rel;
      return std::nullopt;
    }
    std::string out;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
    ::close(fd);
    return out;
  }
  bool Exists(const std::string& rel) {
    struct stat st;
    return ::lstat(P(rel).c_str(), &st) == 0;
  }
  // A file whose name and content are durable.
  void DurableFile(const std::string& rel, const std::string& data) {
    WriteAt(rel, data, 0, O_TRUNC, "fsync");
    auto slash = rel.rfind('/');
    FsyncPath(slash == std::string::npos ? "" : rel.substr(0, slash), true);
  }

  uint64_t seed_ = 0;
  std::unique_ptr<LossyFs> fs_;
  std::unique_ptr<MountedSession> mount_;
};

TEST_F(LossyFsTest, FsyncKeepsDataAndCutDropsWhatFollows) {
  DurableFile("f", "synced");
  WriteAt("f", "-later", 6);             // not synced
  ASSERT_EQ(Read("f"), "synced-later");  // the live view has it at once
  fs_->PowerCut(false);
  EXPECT_EQ(Read("f"), "synced");
}

TEST_F(LossyFsTest, FdatasyncKeepsData) {
  WriteAt("f", "", 0);
  FsyncPath("", true);
  WriteAt("f", "datasynced", 0, 0, "fdatasync");
  fs_->PowerCut(false);
  EXPECT_EQ(Read("f"), "datasynced");
}

TEST_F(LossyFsTest, UnsyncedWriteIsLost) {
  DurableFile("f", "");
  WriteAt("f", "never synced", 0);
  WriteAt("f", "also not", 100);
  fs_->PowerCut(false);
  EXPECT_EQ(Read("f"), "");
}

TEST_F(LossyFsTest, UnsyncedCreateIsLostEvenWhenTheFileWasFsynced) {
  WriteAt("plain", "x", 0);
  // POSIX-strict: fsync of the file does not make its name durable; only
  // an fsync of the directory does (ext4 would keep it; we do not).
  WriteAt("fsynced", "y", 0, 0, "fsync");
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  fs_->PowerCut(false);
  EXPECT_FALSE(Exists("plain"));
  EXPECT_FALSE(Exists("fsynced"));
  EXPECT_FALSE(Exists("d"));
}

TEST_F(LossyFsTest, DirFsyncKeepsEntries) {
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  WriteAt("d/f", "data", 0, 0, "fsync");
  WriteAt("d/g", "unsynced data", 0);
  FsyncPath("d", true);
  FsyncPath("", true);
  ASSERT_EQ(::unlink(P("d/g").c_str()), 0);  // after the sync: reverts
  fs_->PowerCut(false);
  EXPECT_EQ(Read("d/f"), "data");
  // The entry survives; its data was never synced.
  EXPECT_EQ(Read("d/g"), "");
}

TEST_F(LossyFsTest, RenameWithoutDirFsyncReverts) {
  DurableFile("a", "content");
  ASSERT_EQ(::rename(P("a").c_str(), P("b").c_str()), 0);
  ASSERT_TRUE(Exists("b"));
  fs_->PowerCut(false);
  EXPECT_EQ(Read("a"), "content");
  EXPECT_FALSE(Exists("b"));
  // The same rename with the directory synced stays.
  ASSERT_EQ(::rename(P("a").c_str(), P("b").c_str()), 0);
  FsyncPath("", true);
  fs_->PowerCut(false);
  EXPECT_FALSE(Exists("a"));
  EXPECT_EQ(Read("b"), "content");
}

TEST_F(LossyFsTest, ODsyncAndOSyncWritesAreKept) {
  DurableFile("f", "");
  DurableFile("g", "");
  WriteAt("f", "dsync", 0, O_DSYNC);
  WriteAt("f", "+lost", 5);  // a plain write after it is not kept
  WriteAt("g", "osync", 0, O_SYNC);
  fs_->PowerCut(false);
  EXPECT_EQ(Read("f"), "dsync");
  EXPECT_EQ(Read("g"), "osync");
}

TEST_F(LossyFsTest, SyncThroughTheControlFileKeepsEverything) {
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  WriteAt("d/f", "f data", 0);
  WriteAt("g", "g data", 0);
  ASSERT_EQ(::symlink("d/f", P("link").c_str()), 0);
  WriteAt(std::string(kControlName), "sync\n", 0);
  WriteAt("g", " after sync", 6);
  WriteAt(std::string(kControlName), "cut", 0);
  EXPECT_EQ(fs_->cuts(), 1u);
  EXPECT_EQ(Read("d/f"), "f data");
  EXPECT_EQ(Read("g"), "g data");
  EXPECT_EQ(Read("link"), "f data");
  EXPECT_EQ(Read(std::string(kControlName)), "cuts 1 syncs 1\n");
  // A wrong command is refused, naming nothing done.
  int fd = ::open(P(std::string(kControlName)).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::write(fd, "cutt", 4), -1);
  EXPECT_EQ(errno, EINVAL);
  ::close(fd);
  EXPECT_EQ(fs_->cuts(), 1u);
}

TEST_F(LossyFsTest, TornWriteKeepsAPrefixEndingAtASectorBoundary) {
  const std::string old(8192, 'A');
  DurableFile("f", old);
  const off_t off = 1000;  // not sector-aligned: boundaries at 1024..4608
  const std::string fresh(4096, 'B');
  WriteAt("f", fresh, off);
  CutReport rep = fs_->PowerCut(true);
  std::printf("torn write: seed %llu kept %llu of %llu bytes at %llu\n",
              static_cast<unsigned long long>(seed_),
              static_cast<unsigned long long>(rep.kept),
              static_cast<unsigned long long>(rep.length),
              static_cast<unsigned long long>(rep.offset));
  ASSERT_TRUE(rep.torn);
  EXPECT_EQ(rep.offset, static_cast<uint64_t>(off));
  EXPECT_EQ(rep.length, fresh.size());
  EXPECT_EQ((off + rep.kept) % kSectorBytes, 0u);
  EXPECT_GT(rep.kept, 0u);
  EXPECT_LT(rep.kept, fresh.size());
  std::string want = old;
  want.replace(off, rep.kept, fresh.substr(0, rep.kept));
  EXPECT_EQ(Read("f"), want);

  // The torn state is durable now: a second cut changes nothing.
  fs_->PowerCut(true);
  EXPECT_EQ(Read("f"), want);
  // A write inside one sector has no boundary to tear at: dropped whole.
  WriteAt("f", "CC", 10);
  rep = fs_->PowerCut(true);
  EXPECT_FALSE(rep.torn);
  EXPECT_EQ(Read("f"), want);
}

TEST_F(LossyFsTest, TearChoiceIsReproducibleFromTheSeed) {
  // Same seed, same history: the same sectors. Bounded: 4 cuts per run.
  DurableFile("f", std::string(512, 'A'));
  std::vector<uint64_t> first, second;
  for (int round = 0; round < 4; ++round) {
    WriteAt("f", std::string(64 * 1024, 'B'), 0);
    first.push_back(fs_->PowerCut(true).kept);
  }
  mount_.reset();
  fs_ = std::make_unique<LossyFs>(seed_);
  fuse::MountOptions mo;
  mo.fsname = mo.subtype = "lossyfs";
  auto m =
      MountedSession::Start(fs_.get(), LossyFs::SessionOptionsForLossyFs(), mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  mount_ = std::move(*m);
  DurableFile("f", std::string(512, 'A'));
  for (int round = 0; round < 4; ++round) {
    WriteAt("f", std::string(64 * 1024, 'B'), 0);
    second.push_back(fs_->PowerCut(true).kept);
  }
  EXPECT_EQ(first, second);
  for (uint64_t k : first) {
    EXPECT_EQ(k % kSectorBytes, 0u);
    EXPECT_GT(k, 0u);
  }
}

}  // namespace
}  // namespace stripefs::lossyfs
