// Timestamps through the kernel (issue 37), on an embedded volume and on a
// local cluster (one per backend for the whole suite):
//  - with the writeback cache (the default) mtime and ctime after a
//    remount are, to the nanosecond, what stat showed before it, for
//    buffered, O_DIRECT and mmap writes, truncate and fallocate (the kernel
//    owns them; stripe commits must not stamp their own);
//  - atime: relatime (the default) moves it on the first read after a
//    write and not on the second, and keeps it across a remount; noatime
//    never moves it; strictatime moves it on every read. Each read opens
//    the file anew: an OPEN drops the kernel's pages (no FOPEN_KEEP_CACHE),
//    so the read reaches the file system.
// Skips loudly without root, /dev/fuse or the stripefs binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/fs/fs_mount.h"
#include "tests/support/file_bytes.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fs {
namespace {

using stripefs::testing::RandomBytes;
using stripefs::testing::ReadFileBytes;
using testing::BackendSkipMessage;
using testing::FsBackend;
using testing::FsBackendName;
using testing::FsMount;
using testing::FsMountOptions;
using testing::IsCluster;

bool operator==(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}
bool operator<(const struct timespec& a, const struct timespec& b) {
  return std::tie(a.tv_sec, a.tv_nsec) < std::tie(b.tv_sec, b.tv_nsec);
}
std::string Str(const struct timespec& t) {
  char ns[16];
  std::snprintf(ns, sizeof(ns), "%09ld", static_cast<long>(t.tv_nsec));
  return std::to_string(t.tv_sec) + "." + ns;
}

struct stat Stat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0)
      << path << ": " << std::strerror(errno);
  return st;
}

// mtime and ctime of `after` are those of `before`, to the nanosecond.
void ExpectSameTimes(const struct stat& before, const struct stat& after,
                     const std::string& what) {
  EXPECT_TRUE(before.st_mtim == after.st_mtim)
      << what << ": mtime " << Str(before.st_mtim) << " before the remount, "
      << Str(after.st_mtim) << " after";
  EXPECT_TRUE(before.st_ctim == after.st_ctim)
      << what << ": ctime " << Str(before.st_ctim) << " before the remount, "
      << Str(after.st_ctim) << " after";
  EXPECT_EQ(before.st_size, after.st_size) << what;
}

void PwriteAll(int fd, const void* data, size_t n, off_t off) {
  ASSERT_EQ(::pwrite(fd, data, n, off), static_cast<ssize_t>(n))
      << std::strerror(errno);
}

// Sets atime an hour before mtime (mtime kept): the file was last read
// before its latest write, which relatime then updates at the next read.
void AtimeBeforeTheWrite(const std::string& path) {
  const struct stat st = Stat(path);
  struct timespec ts[2];
  ts[0] = st.st_mtim;
  ts[0].tv_sec -= 3600;
  ts[1].tv_sec = 0;
  ts[1].tv_nsec = UTIME_OMIT;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0)
      << std::strerror(errno);
}

class FsTimesTest : public ::testing::TestWithParam<FsBackend> {
 protected:
  static void TearDownTestSuite() { mounts_.clear(); }
  void SetUp() override {
    const std::string skip = BackendSkipMessage(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
    auto& m = mounts_[GetParam()];
    if (!m) {
      FsMountOptions o;
      o.backend = GetParam();
      // Commits happen when the kernel flushes (close, unmount), after
      // its SETATTR of the times: the order in which today's stamping
      // commits overwrite them.
      o.fs.idle_flush = std::chrono::milliseconds(60000);
      auto started = FsMount::Start(o);
      ASSERT_TRUE(started.ok()) << started.status().ToString();
      m = std::move(*started);
    }
    m_ = m.get();
    ASSERT_TRUE(m_->fs().options().atime.mode == AtimeMode::kRelatime);
  }
  // A name of this test's own ("Case/backend" without the slash).
  std::string P(const std::string& name) {
    std::string test =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : test) c = c == '/' ? '-' : c;
    return m_->Path(test + "-" + name);
  }
  // stat of `path` before and after a remount: same mtime and ctime.
  void ExpectTimesSurviveRemount(const std::string& path,
                                 const std::string& what) {
    const struct stat before = Stat(path);
    ASSERT_TRUE(m_->Remount().ok());
    ExpectSameTimes(before, Stat(path), what);
  }

  // A mount with atime `mode` (embedded: a fresh volume mounted with the
  // -o value; cluster: a second client of the suite's cluster); its path
  // for `name` in *path. Destroyed by the caller (RAII).
  struct OtherMount {
    std::unique_ptr<FsMount> own;          // embedded
    std::unique_ptr<MountService> second;  // cluster
    std::string dir;
  };
  OtherMount MountWith(const std::string& option, AtimeMode mode) {
    OtherMount o;
    if (IsCluster(GetParam())) {
      StripeFsOptions fs;
      fs.atime.mode = mode;
      auto b = m_->MountAgain("mnt-" + option, fs, /*writeback_cache=*/true);
      EXPECT_TRUE(b.ok()) << b.status().ToString();
      if (!b.ok()) return o;
      o.second = std::move(*b);
      o.dir = o.second->options().mountpoint;
    } else {
      FsMountOptions opts;
      opts.backend = GetParam();
      opts.mount_options = {option};
      auto s = FsMount::Start(opts);
      EXPECT_TRUE(s.ok()) << s.status().ToString();
      if (!s.ok()) return o;
      o.own = std::move(*s);
      o.dir = o.own->mnt();
    }
    return o;
  }

  static inline std::map<FsBackend, std::unique_ptr<FsMount>> mounts_;
  FsMount* m_ = nullptr;
};

TEST_P(FsTimesTest, BufferedWriteTimesSurviveARemount) {
  const std::string p = P("f");
  const auto data = RandomBytes(300 * 1024, 1);
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  PwriteAll(fd, data.data(), data.size(), 0);
  PwriteAll(fd, data.data(), 5000, 2 * 1024 * 1024);  // a second stripe
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "buffered write");
}

TEST_P(FsTimesTest, DirectWriteTimesSurviveARemount) {
  const std::string p = P("f");
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, 4096, 64 * 1024), 0);
  std::unique_ptr<void, decltype(&std::free)> own(buf, &std::free);
  const auto data = RandomBytes(64 * 1024, 2);
  std::memcpy(buf, data.data(), data.size());
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  PwriteAll(fd, buf, data.size(), 0);
  PwriteAll(fd, buf, data.size(), 1024 * 1024);
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "O_DIRECT write");
}

TEST_P(FsTimesTest, MmapWriteTimesSurviveARemount) {
  const std::string p = P("f");
  const size_t n = 256 * 1024;
  int fd = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(n)), 0);
  void* map = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  const auto data = RandomBytes(n, 3);
  std::memcpy(map, data.data(), n);
  ASSERT_EQ(::msync(map, n, MS_SYNC), 0);
  ASSERT_EQ(::munmap(map, n), 0);
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "mmap write");
  EXPECT_EQ(ReadFileBytes(p), data);
}

TEST_P(FsTimesTest, TruncateTimesSurviveARemount) {
  const std::string p = P("f");
  const auto data = RandomBytes(700 * 1024, 4);
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  PwriteAll(fd, data.data(), data.size(), 0);
  ASSERT_EQ(::ftruncate(fd, 300 * 1024), 0);       // shrink, dirty pages below
  ASSERT_EQ(::ftruncate(fd, 3 * 1024 * 1024), 0);  // and grow
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "truncate");
  ASSERT_EQ(::truncate(p.c_str(), 1000), 0);  // by path, nothing open
  ExpectTimesSurviveRemount(p, "truncate(2)");
  // To the size it has: the kernel keeps its times (truncate(2) moves them
  // only with the size, as ext4 does), so metadata must too.
  ASSERT_EQ(::truncate(p.c_str(), 1000), 0);
  ExpectTimesSurviveRemount(p, "truncate(2) to the same size");
}

TEST_P(FsTimesTest, FallocateTimesSurviveARemount) {
  const std::string p = P("f");
  const uint64_t S = m_->volume().client().stripe_size();
  const auto data = RandomBytes(3 * S, 5);
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  PwriteAll(fd, data.data(), data.size(), 0);
  // Grow by allocation, then punch a whole stripe out.
  ASSERT_EQ(::fallocate(fd, 0, 0, static_cast<off_t>(4 * S)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        static_cast<off_t>(S), static_cast<off_t>(S)),
            0)
      << std::strerror(errno);
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "fallocate");
}

// The kernel's time flush (here a futimens, the same SETATTR of mtime and
// ctime) while a partial stripe is buffered in the file system: the times
// wait for the data's commit instead of forcing one (a commit per
// writeback time flush cut partial stripes, breaking coalescing). Metadata
// (what another client reads) shows them only once the data is in.
TEST_P(FsTimesTest, TimesOfBufferedDataWaitForItsCommit) {
  const std::string p = P("f");
  const size_t n = 64 * 1024;  // O_DIRECT: straight into the stripe buffer
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, 4096, n), 0);
  std::unique_ptr<void, decltype(&std::free)> own(buf, &std::free);
  const auto data = RandomBytes(n, 6);
  std::memcpy(buf, data.data(), n);
  int fd = ::open(p.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  PwriteAll(fd, buf, n, 0);
  const auto flushes = [&](const char* why) {
    return m_->fs()
        .StatsJson()["coalescing"]["partial_flushes"][why]
        .get<uint64_t>();
  };
  const uint64_t other_before = flushes("other");
  const uint64_t fsync_before = flushes("fsync");
  struct timespec ts[2];
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = 1500000000;
  ts[1].tv_nsec = 123456789;
  ASSERT_EQ(::futimens(fd, ts), 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_TRUE(st.st_mtim == ts[1]) << Str(st.st_mtim);
  // Still buffered, no partial flush, and metadata has not got the time.
  EXPECT_GT(
      m_->fs().StatsJson()["coalescing"]["buffered_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(flushes("other"), other_before);
  auto stored = m_->volume().meta().GetAttr(st.st_ino);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_NE(stored->mtime.sec, ts[1].tv_sec)
      << "stored at once, not held with its data";
  // fsync commits the data, and the times with it.
  ASSERT_EQ(::fsync(fd), 0) << std::strerror(errno);
  EXPECT_EQ(flushes("fsync"), fsync_before + 1);
  stored = m_->volume().meta().GetAttr(st.st_ino);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->size, n);
  EXPECT_EQ(stored->mtime.sec, ts[1].tv_sec);
  EXPECT_EQ(stored->mtime.nsec, static_cast<uint32_t>(ts[1].tv_nsec));
  EXPECT_EQ(stored->ctime.sec, st.st_ctim.tv_sec);
  EXPECT_EQ(stored->ctime.nsec, static_cast<uint32_t>(st.st_ctim.tv_nsec));
  ASSERT_EQ(::close(fd), 0);
  ExpectTimesSurviveRemount(p, "futimens of buffered data");
  EXPECT_TRUE(Stat(p).st_mtim == ts[1]);
}

TEST_P(FsTimesTest, RelatimeMovesAtimeOnTheFirstReadAfterAWriteOnly) {
  const std::string p = P("f");
  const auto data = RandomBytes(100 * 1024, 6);
  {
    int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    PwriteAll(fd, data.data(), data.size(), 0);
    ASSERT_EQ(::close(fd), 0);
  }
  AtimeBeforeTheWrite(p);
  const struct stat s0 = Stat(p);
  ASSERT_TRUE(s0.st_atim < s0.st_mtim);

  EXPECT_EQ(ReadFileBytes(p), data);
  const struct stat s1 = Stat(p);
  EXPECT_TRUE(s0.st_atim < s1.st_atim)
      << "first read: atime " << Str(s0.st_atim) << " -> " << Str(s1.st_atim);
  EXPECT_TRUE(s1.st_mtim < s1.st_atim) << Str(s1.st_atim);
  // A read changes neither mtime nor ctime.
  EXPECT_TRUE(s0.st_mtim == s1.st_mtim);
  EXPECT_TRUE(s0.st_ctim == s1.st_ctim);

  EXPECT_EQ(ReadFileBytes(p), data);
  const struct stat s2 = Stat(p);
  EXPECT_TRUE(s1.st_atim == s2.st_atim)
      << "second read: atime " << Str(s1.st_atim) << " -> " << Str(s2.st_atim);

  // Written to metadata (at the last close, or at the unmount at the
  // latest): the remounted file shows it.
  ASSERT_TRUE(m_->Remount().ok());
  const struct stat s3 = Stat(p);
  EXPECT_TRUE(s1.st_atim == s3.st_atim)
      << Str(s1.st_atim) << " before the remount, " << Str(s3.st_atim)
      << " after";
  EXPECT_TRUE(s1.st_ctim == s3.st_ctim);
}

TEST_P(FsTimesTest, RelatimeMovesADirectorysAtimeAtItsListing) {
  const std::string d = P("d");
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_EQ(::close(::open((d + "/x").c_str(), O_CREAT | O_WRONLY, 0644)), 0);
  AtimeBeforeTheWrite(d);
  const struct stat s0 = Stat(d);
  auto list = [&] {
    int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    char buf[4096];
    while (::syscall(SYS_getdents64, fd, buf, sizeof(buf)) > 0) {
    }
    ::close(fd);
  };
  list();
  const struct stat s1 = Stat(d);
  EXPECT_TRUE(s0.st_atim < s1.st_atim) << Str(s1.st_atim);
  list();
  EXPECT_TRUE(Stat(d).st_atim == s1.st_atim);
}

// Reads `path` three times (each read in an open of its own) and returns
// the atime stat shows after each.
std::vector<struct timespec> AtimesOfThreeReads(
    const std::string& path, const std::vector<uint8_t>& data) {
  std::vector<struct timespec> out;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ReadFileBytes(path), data);
    out.push_back(Stat(path).st_atim);
  }
  return out;
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  PwriteAll(fd, data.data(), data.size(), 0);
  ASSERT_EQ(::close(fd), 0);
}

TEST_P(FsTimesTest, NoatimeNeverMovesAtime) {
  OtherMount o = MountWith("noatime", AtimeMode::kNoatime);
  ASSERT_FALSE(o.dir.empty());
  const auto data = RandomBytes(10 * 1024, 7);
  // The same reads of a file written the same way move atime on the
  // suite's relatime mount (the control), never on the noatime one.
  for (const std::string& p : {o.dir + "/noatime-f", P("relatime-f")}) {
    const bool noatime = p.rfind(o.dir, 0) == 0;
    WriteFile(p, data);
    AtimeBeforeTheWrite(p);
    const struct timespec a0 = Stat(p).st_atim;
    const auto seen = AtimesOfThreeReads(p, data);
    for (size_t i = 0; i < seen.size(); ++i) {
      if (noatime) {
        EXPECT_TRUE(seen[i] == a0) << "noatime, read " << i << ": " << Str(a0)
                                   << " -> " << Str(seen[i]);
      } else if (i == 0) {
        EXPECT_TRUE(a0 < seen[i]) << "relatime, first read: " << Str(a0);
      }
    }
  }
}

TEST_P(FsTimesTest, StrictatimeMovesAtimeOnEveryRead) {
  OtherMount o = MountWith("strictatime", AtimeMode::kStrictatime);
  ASSERT_FALSE(o.dir.empty());
  const std::string p = o.dir + "/strictatime-f";
  const auto data = RandomBytes(10 * 1024, 8);
  WriteFile(p, data);
  struct timespec last = Stat(p).st_atim;
  const auto seen = AtimesOfThreeReads(p, data);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_TRUE(last < seen[i])
        << "read " << i << ": " << Str(last) << " -> " << Str(seen[i]);
    last = seen[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Backend, FsTimesTest,
                         ::testing::Values(FsBackend::kEmbedded,
                                           FsBackend::kCluster),
                         [](const ::testing::TestParamInfo<FsBackend>& i) {
                           return std::string(FsBackendName(i.param));
                         });

}  // namespace
}  // namespace stripefs::fs
