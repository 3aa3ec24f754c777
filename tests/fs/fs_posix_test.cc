// POSIX behaviour of StripeFs through the kernel: every operation, done with
// plain syscalls on a real mount (in-process server). Every test runs on
// two backends: an embedded volume and a fresh local cluster (metad + 6
// chunkd on loopback via `stripefs cluster up`, 4+2, Volume::ConnectCluster);
// test names end in /embedded or /cluster. The embedded cases also run over
// FUSE-over-io-uring (/embedded_uring; enable_uring is set and restored).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/fs/fs_mount.h"
#include "tests/support/file_bytes.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fs::testing {
namespace {

constexpr size_t kMiB = 1 << 20;

// Deterministic test payload (tests/support/random_bytes.h).
std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  return stripefs::testing::RandomBytes(n, seed);
}

void WriteAll(int fd, const std::vector<uint8_t>& d, off_t off) {
  size_t done = 0;
  while (done < d.size()) {
    ssize_t n = ::pwrite(fd, d.data() + done, d.size() - done, off + done);
    ASSERT_GT(n, 0) << std::strerror(errno);
    done += n;
  }
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  return stripefs::testing::ReadFileBytes(path);
}

void PutFile(const std::string& path, const std::vector<uint8_t>& d) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  WriteAll(fd, d, 0);
  ASSERT_EQ(::close(fd), 0);
}

uint64_t J(const nlohmann::json& j, const char* a, const char* b) {
  return j[a][b].get<uint64_t>();
}

// Where the suite runs: a backend and the FUSE transport carrying it.
struct FsCase {
  FsBackend backend;
  fuse::TransportChoice transport;
};
void PrintTo(const FsCase& c, std::ostream* os) {
  *os << FsBackendName(c.backend) << " over "
      << fuse::TransportChoiceName(c.transport);
}

class FsPosixTest : public ::testing::TestWithParam<FsCase> {
 protected:
  void SetUp() override {
    const std::string skip =
        BackendSkipMessage(GetParam().backend, GetParam().transport);
    if (!skip.empty()) GTEST_SKIP() << skip;
    FsMountOptions o;
    o.backend = GetParam().backend;
    o.transport = GetParam().transport;
    o.fs.idle_flush =
        std::chrono::milliseconds(60000);  // only explicit flushes
    Customize(&o);
    auto m = FsMount::Start(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
  }
  void TearDown() override { m_.reset(); }
  virtual void Customize(FsMountOptions*) {}
  std::string P(const std::string& rel) { return m_->Path(rel); }
  std::unique_ptr<FsMount> m_;
};

TEST_P(FsPosixTest, CreateWriteReadAcrossStripes) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, kMiB - 1, kMiB,
                      kMiB + 1, 3 * kMiB + 12345}) {
    const std::string p = P("f" + std::to_string(size));
    auto d = Pattern(size, static_cast<uint32_t>(size));
    PutFile(p, d);
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(static_cast<size_t>(st.st_size), size);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    EXPECT_EQ(ReadAll(p), d) << "size " << size;
  }
  // The same data after dropping the kernel's caches: remount.
  ASSERT_TRUE(m_->Remount().ok());
  for (size_t size : {size_t{1}, kMiB + 1, 3 * kMiB + 12345}) {
    EXPECT_EQ(ReadAll(P("f" + std::to_string(size))),
              Pattern(size, static_cast<uint32_t>(size)));
  }
}

TEST_P(FsPosixTest, OverwriteInsideAndAcrossStripes) {
  auto d = Pattern(3 * kMiB, 7);
  PutFile(P("o"), d);
  int fd = ::open(P("o").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  auto patch = Pattern(300000, 8);
  WriteAll(fd, patch, kMiB - 1000);  // straddles a stripe boundary
  std::copy(patch.begin(), patch.end(), d.begin() + kMiB - 1000);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  EXPECT_EQ(ReadAll(P("o")), d);
}

TEST_P(FsPosixTest, ReadsSeeBufferedDataAndFsyncCommits) {
  int fd = ::open(P("b").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  auto d = Pattern(200000, 3);  // a partial stripe: stays buffered
  WriteAll(fd, d, 5000);
  // O_DIRECT reads go to the server (after the kernel wrote its dirty
  // pages): the server must answer from its buffer.
  int dfd = ::open(P("b").c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(dfd, 0);
  std::vector<uint8_t> got(300000);
  ssize_t n = ::pread(dfd, got.data(), got.size(), 0);
  ASSERT_EQ(n, 205000);
  EXPECT_TRUE(std::all_of(got.begin(), got.begin() + 5000,
                          [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(std::equal(d.begin(), d.end(), got.begin() + 5000));
  auto before = m_->fs().StatsJson();
  EXPECT_GT(before["coalescing"]["buffered_bytes"].get<uint64_t>(), 0u);
  const uint64_t stripes_before = J(before, "backend", "stripe_writes");
  ASSERT_EQ(::fsync(fd), 0);
  auto after = m_->fs().StatsJson();
  EXPECT_EQ(after["coalescing"]["buffered_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(J(after, "backend", "stripe_writes"), stripes_before);
  EXPECT_GE(after["coalescing"]["partial_flushes"]["fsync"].get<uint64_t>(),
            1u);
  ::close(dfd);
  ::close(fd);
}

TEST_P(FsPosixTest, CoalescingTurnsSmallWritesIntoFullStripes) {
  int fd = ::open(P("c").c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
  ASSERT_GE(fd, 0);
  // 4 MiB in odd-sized direct writes: none is stripe aligned.
  auto d = Pattern(4 * kMiB, 11);
  size_t off = 0;
  const size_t sizes[] = {4096 * 3, 65536, 100000, 7, 333333};
  for (int i = 0; off < d.size(); ++i) {
    size_t n = std::min(sizes[i % 5], d.size() - off);
    ASSERT_EQ(::pwrite(fd, d.data() + off, n, off), static_cast<ssize_t>(n));
    off += n;
  }
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  auto s = m_->fs().StatsJson();
  EXPECT_EQ(J(s, "backend", "full_stripe_writes"), 4u);
  EXPECT_EQ(J(s, "backend", "rmw_stripes"), 0u);
  EXPECT_EQ(J(s, "backend", "parity_delta_updates"), 0u);
  EXPECT_EQ(J(s, "writes", "aligned"), 0u);
  EXPECT_GT(J(s, "writes", "requests"), 10u);
  EXPECT_EQ(ReadAll(P("c")), d);
}

TEST_P(FsPosixTest, TruncateAcrossStripes) {
  auto d = Pattern(3 * kMiB + 100, 5);
  PutFile(P("t"), d);
  ASSERT_EQ(::truncate(P("t").c_str(), kMiB + 10), 0);
  struct stat st {};
  ASSERT_EQ(::stat(P("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kMiB + 10));
  ASSERT_EQ(::truncate(P("t").c_str(), 2 * kMiB + 7), 0);
  auto got = ReadAll(P("t"));
  ASSERT_EQ(got.size(), 2 * kMiB + 7);
  EXPECT_TRUE(std::equal(d.begin(), d.begin() + kMiB + 10, got.begin()));
  EXPECT_TRUE(std::all_of(got.begin() + kMiB + 10, got.end(),
                          [](uint8_t b) { return b == 0; }));
  // O_TRUNC
  int fd = ::open(P("t").c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 0);
  ::close(fd);
  ASSERT_TRUE(m_->Remount().ok());
  ASSERT_EQ(::stat(P("t").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
}

TEST_P(FsPosixTest, DirectoriesAndReaddir) {
  ASSERT_EQ(::mkdir(P("d").c_str(), 0755), 0);
  EXPECT_EQ(::mkdir(P("d").c_str(), 0755), -1);
  EXPECT_EQ(errno, EEXIST);
  std::set<std::string> want;
  for (int i = 0; i < 300; ++i) {  // more than one READDIR buffer
    std::string name = "entry-with-a-longish-name-" + std::to_string(i);
    PutFile(P("d/" + name), {});
    want.insert(name);
  }
  ASSERT_EQ(::mkdir(P("d/sub").c_str(), 0700), 0);
  want.insert("sub");
  DIR* dir = ::opendir(P("d").c_str());
  ASSERT_NE(dir, nullptr);
  std::set<std::string> got;
  bool dot = false, dotdot = false;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n == ".") {
      dot = true;
      continue;
    }
    if (n == "..") {
      dotdot = true;
      continue;
    }
    EXPECT_TRUE(got.insert(n).second) << "duplicate " << n;
    if (n == "sub")
      EXPECT_EQ(e->d_type, DT_DIR);
    else
      EXPECT_EQ(e->d_type, DT_REG);
  }
  ::closedir(dir);
  EXPECT_TRUE(dot && dotdot);
  EXPECT_EQ(got, want);
  EXPECT_EQ(::rmdir(P("d").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(::rmdir(P("d/sub").c_str()), 0);
  struct stat st {};
  EXPECT_EQ(::stat(P("d/sub").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::unlink(P("d/entry-with-a-longish-name-7").c_str()), 0);
  EXPECT_EQ(::unlink(P("d/entry-with-a-longish-name-7").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::unlink(P("d").c_str()), -1);
  EXPECT_EQ(errno, EISDIR);
  int dfd = ::open(P("d").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(::fsync(dfd), 0);  // FSYNCDIR
  ::close(dfd);
}

TEST_P(FsPosixTest, RenameVariants) {
  PutFile(P("a"), Pattern(10, 1));
  PutFile(P("b"), Pattern(20, 2));
  ASSERT_EQ(::renameat2(AT_FDCWD, P("a").c_str(), AT_FDCWD, P("b").c_str(),
                        RENAME_NOREPLACE),
            -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(::renameat2(AT_FDCWD, P("a").c_str(), AT_FDCWD, P("b").c_str(),
                        RENAME_EXCHANGE),
            0);
  EXPECT_EQ(ReadAll(P("a")), Pattern(20, 2));
  EXPECT_EQ(ReadAll(P("b")), Pattern(10, 1));
  ASSERT_EQ(::rename(P("a").c_str(), P("b").c_str()), 0);  // replaces b
  EXPECT_EQ(ReadAll(P("b")), Pattern(20, 2));
  struct stat st {};
  EXPECT_EQ(::stat(P("a").c_str(), &st), -1);
  ASSERT_EQ(::mkdir(P("dir1").c_str(), 0755), 0);
  ASSERT_EQ(::rename(P("b").c_str(), P("dir1/moved").c_str()), 0);
  EXPECT_EQ(ReadAll(P("dir1/moved")), Pattern(20, 2));
  ASSERT_EQ(::rename(P("dir1").c_str(), P("dir2").c_str()), 0);
  EXPECT_EQ(ReadAll(P("dir2/moved")), Pattern(20, 2));
}

TEST_P(FsPosixTest, HardLinksSymlinksAndSpecialFiles) {
  PutFile(P("x"), Pattern(100, 9));
  ASSERT_EQ(::link(P("x").c_str(), P("y").c_str()), 0);
  struct stat sx {
  }, sy{};
  ASSERT_EQ(::stat(P("x").c_str(), &sx), 0);
  ASSERT_EQ(::stat(P("y").c_str(), &sy), 0);
  EXPECT_EQ(sx.st_ino, sy.st_ino);
  EXPECT_EQ(sx.st_nlink, 2u);
  ASSERT_EQ(::unlink(P("x").c_str()), 0);
  EXPECT_EQ(ReadAll(P("y")), Pattern(100, 9));
  ASSERT_EQ(::symlink("y", P("s").c_str()), 0);
  char buf[64] = {};
  ASSERT_EQ(::readlink(P("s").c_str(), buf, sizeof(buf)), 1);
  EXPECT_STREQ(buf, "y");
  EXPECT_EQ(ReadAll(P("s")), Pattern(100, 9));  // followed
  struct stat sl {};
  ASSERT_EQ(::lstat(P("s").c_str(), &sl), 0);
  EXPECT_TRUE(S_ISLNK(sl.st_mode));
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0600), 0);
  ASSERT_EQ(::lstat(P("fifo").c_str(), &sl), 0);
  EXPECT_TRUE(S_ISFIFO(sl.st_mode));
  ASSERT_EQ(::mknod(P("sock").c_str(), S_IFSOCK | 0600, 0), 0);
  ASSERT_EQ(::lstat(P("sock").c_str(), &sl), 0);
  EXPECT_TRUE(S_ISSOCK(sl.st_mode));
}

TEST_P(FsPosixTest, AttributesModeOwnerTimes) {
  PutFile(P("m"), Pattern(10, 1));
  ASSERT_EQ(::chmod(P("m").c_str(), 0600), 0);
  ASSERT_EQ(::chown(P("m").c_str(), 1234, 5678), 0);
  struct stat st {};
  ASSERT_EQ(::stat(P("m").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  timespec ts[2] = {{1000000000, 123}, {1100000000, 456}};
  ASSERT_EQ(::utimensat(AT_FDCWD, P("m").c_str(), ts, 0), 0);
  ASSERT_EQ(::stat(P("m").c_str(), &st), 0);
  EXPECT_EQ(st.st_atim.tv_sec, 1000000000);
  EXPECT_EQ(st.st_mtim.tv_sec, 1100000000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 456);
  timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ASSERT_EQ(::utimensat(AT_FDCWD, P("m").c_str(), now, 0), 0);
  ASSERT_EQ(::stat(P("m").c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, 1600000000);
  // Permission checks by the kernel (default_permissions): a non-root
  // process cannot open a 0600 file of another owner.
  ASSERT_EQ(::chown(P("m").c_str(), 0, 0), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setresgid(4321, 4321, 4321) != 0 ||
        ::setresuid(4321, 4321, 4321) != 0)
      _exit(2);
    int fd = ::open(P("m").c_str(), O_RDONLY);
    _exit(fd < 0 && errno == EACCES ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_P(FsPosixTest, Xattrs) {
  PutFile(P("x"), {});
  const std::string p = P("x");
  ASSERT_EQ(::setxattr(p.c_str(), "user.a", "hello", 5, 0), 0);
  ASSERT_EQ(::setxattr(p.c_str(), "user.b", "", 0, 0), 0);
  EXPECT_EQ(::setxattr(p.c_str(), "user.a", "x", 1, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::setxattr(p.c_str(), "user.c", "x", 1, XATTR_REPLACE), -1);
  EXPECT_EQ(errno, ENODATA);
  char buf[64];
  EXPECT_EQ(::getxattr(p.c_str(), "user.a", nullptr, 0), 5);
  ASSERT_EQ(::getxattr(p.c_str(), "user.a", buf, sizeof(buf)), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(::getxattr(p.c_str(), "user.a", buf, 2), -1);
  EXPECT_EQ(errno, ERANGE);
  ssize_t n = ::listxattr(p.c_str(), buf, sizeof(buf));
  ASSERT_GT(n, 0);
  std::set<std::string> names;
  for (ssize_t i = 0; i < n; i += std::strlen(buf + i) + 1)
    names.insert(buf + i);
  EXPECT_EQ(names, (std::set<std::string>{"user.a", "user.b"}));
  ASSERT_EQ(::removexattr(p.c_str(), "user.a"), 0);
  EXPECT_EQ(::getxattr(p.c_str(), "user.a", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
}

TEST_P(FsPosixTest, StatfsReportsCapacity) {
  struct statvfs v {};
  ASSERT_EQ(::statvfs(m_->mnt().c_str(), &v), 0);
  EXPECT_GT(v.f_blocks, 0u);
  EXPECT_GT(v.f_bavail, 0u);
  EXPECT_LE(v.f_bavail, v.f_blocks);
  EXPECT_EQ(v.f_namemax, 255u);
  // 4+2: usable space is at most 4/6 of the raw space. One file system
  // holds every chunk store (the loopback cluster's 6 chunkd too), counted
  // once. fs_space_test checks the exact figures on a small volume.
  struct statvfs raw {};
  ASSERT_EQ(::statvfs(m_->volume_dir().c_str(), &raw), 0);
  EXPECT_LE(v.f_blocks * v.f_frsize, raw.f_blocks * raw.f_frsize * 4 / 6);
}

TEST_P(FsPosixTest, FallocateAndPunchHole) {
  int fd = ::open(P("fa").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, 0, 0, 3 * kMiB), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(3 * kMiB));
  auto d = Pattern(3 * kMiB, 4);
  WriteAll(fd, d, 0);
  ASSERT_EQ(
      ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, kMiB),
      0);
  std::fill(d.begin() + 1000, d.begin() + 1000 + kMiB, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 10 * kMiB), 0);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(3 * kMiB));
  EXPECT_EQ(::fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, kMiB), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ::close(fd);
  EXPECT_EQ(ReadAll(P("fa")), d);
}

TEST_P(FsPosixTest, SeekDataAndHoleFollowStripes) {
  int fd = ::open(P("sp").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  auto d = Pattern(1000, 1);
  WriteAll(fd, d, 2 * kMiB + 5);  // data only in stripe 2
  ASSERT_EQ(::ftruncate(fd, 5 * kMiB), 0);
  ASSERT_EQ(::fsync(fd), 0);
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), static_cast<off_t>(2 * kMiB));
  EXPECT_EQ(::lseek(fd, 0, SEEK_HOLE), 0);
  EXPECT_EQ(::lseek(fd, 2 * kMiB + 10, SEEK_HOLE),
            static_cast<off_t>(3 * kMiB));
  EXPECT_EQ(::lseek(fd, 3 * kMiB, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  EXPECT_EQ(::lseek(fd, 6 * kMiB, SEEK_HOLE), -1);
  EXPECT_EQ(errno, ENXIO);
  ::close(fd);
}

TEST_P(FsPosixTest, DirectIoUnalignedWrites) {
  int fd = ::open(P("dio").c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  ASSERT_GE(fd, 0);
  auto a = Pattern(5000, 1), b = Pattern(kMiB + 3, 2);
  ASSERT_EQ(::pwrite(fd, a.data(), a.size(), 1000), 5000);
  ASSERT_EQ(::pwrite(fd, b.data(), b.size(), 777777),
            static_cast<ssize_t>(b.size()));
  std::vector<uint8_t> model(777777 + b.size(), 0);
  std::copy(a.begin(), a.end(), model.begin() + 1000);
  std::copy(b.begin(), b.end(), model.begin() + 777777);
  std::vector<uint8_t> got(model.size() + 100);
  ASSERT_EQ(::pread(fd, got.data(), got.size(), 0),
            static_cast<ssize_t>(model.size()));
  got.resize(model.size());
  EXPECT_EQ(got, model);
  ::close(fd);
  EXPECT_EQ(ReadAll(P("dio")), model);
}

TEST_P(FsPosixTest, UnlinkedOpenFileLivesUntilClosedThenIsPurged) {
  auto d = Pattern(2 * kMiB + 1, 6);
  PutFile(P("gone"), d);
  int fd = ::open(P("gone").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const uint64_t purged_before = m_->fs().counters().inodes_purged.load();
  ASSERT_EQ(::unlink(P("gone").c_str()), 0);
  std::vector<uint8_t> got(d.size());
  ASSERT_EQ(::pread(fd, got.data(), got.size(), 0),
            static_cast<ssize_t>(d.size()));
  EXPECT_EQ(got, d);
  ::close(fd);
  // The kernel sends FORGET once it drops the inode; bounded wait.
  for (int i = 0;
       i < 100 && m_->fs().counters().inodes_purged.load() == purged_before;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(m_->fs().counters().inodes_purged.load(), purged_before + 1);
  auto orphans = m_->volume().meta().ListOrphans();
  ASSERT_TRUE(orphans.ok());
  EXPECT_TRUE(orphans->empty());
}

TEST_P(FsPosixTest, AlignmentRequestedAndReportedTruthfully) {
  const auto n = m_->session().negotiated();
  EXPECT_TRUE(n.align_requested);
  EXPECT_EQ(n.align_page_order, 20);
  // Acknowledged exactly when the kernel offered the flag; a stock kernel
  // (this host) does not.
  EXPECT_EQ(n.align_acknowledged, n.Offered(fuse_abi::FUSE_ALIGN_PG_ORDER));
  auto s = m_->fs().StatsJson();
  EXPECT_TRUE(s["negotiated"]["alignment_requested"].get<bool>());
  EXPECT_EQ(s["negotiated"]["alignment_acknowledged"].get<bool>(),
            n.align_acknowledged);
  if (!n.Offered(fuse_abi::FUSE_ALIGN_PG_ORDER)) {
    EXPECT_FALSE(n.align_acknowledged) << "stock kernel cannot acknowledge";
  }
}

TEST_P(FsPosixTest, ConcurrentWritersDifferentAndSameFile) {
  constexpr int kThreads = 4;
  constexpr size_t kPer = 3 * kMiB + 4321;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      auto d = Pattern(kPer, 100 + t);
      int fd = ::open(P("own" + std::to_string(t)).c_str(), O_CREAT | O_WRONLY,
                      0644);
      for (size_t off = 0; off < kPer; off += 65536) {
        size_t n = std::min<size_t>(65536, kPer - off);
        (void)!::pwrite(fd, d.data() + off, n, off);
      }
      ::close(fd);
    });
  }
  // Same file: each thread owns an interleaved set of 100000-byte blocks.
  int shared = ::open(P("shared").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(shared, 0);
  constexpr size_t kBlock = 100000, kBlocks = 64;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (size_t b = t; b < kBlocks; b += kThreads) {
        auto d = Pattern(kBlock, static_cast<uint32_t>(1000 + b));
        (void)!::pwrite(shared, d.data(), kBlock, b * kBlock);
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(::fsync(shared), 0);
  ::close(shared);
  ASSERT_TRUE(m_->Remount().ok());
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(ReadAll(P("own" + std::to_string(t))), Pattern(kPer, 100 + t))
        << t;
  }
  auto got = ReadAll(P("shared"));
  ASSERT_EQ(got.size(), kBlock * kBlocks);
  for (size_t b = 0; b < kBlocks; ++b) {
    auto d = Pattern(kBlock, static_cast<uint32_t>(1000 + b));
    EXPECT_TRUE(std::equal(d.begin(), d.end(), got.begin() + b * kBlock))
        << "block " << b;
  }
}

TEST_P(FsPosixTest, PersistenceAcrossRemount) {
  ASSERT_EQ(::mkdir(P("p").c_str(), 0750), 0);
  PutFile(P("p/one"), Pattern(12345, 1));
  PutFile(P("p/two"), Pattern(2 * kMiB + 5, 2));
  ASSERT_EQ(::symlink("one", P("p/link").c_str()), 0);
  ASSERT_EQ(::setxattr(P("p/one").c_str(), "user.k", "v", 1, 0), 0);
  struct stat before {};
  ASSERT_EQ(::stat(P("p/two").c_str(), &before), 0);
  ASSERT_TRUE(m_->Remount().ok());
  struct timespec remounted {};
  ASSERT_EQ(::clock_gettime(CLOCK_REALTIME, &remounted), 0);
  EXPECT_EQ(ReadAll(P("p/one")), Pattern(12345, 1));
  EXPECT_EQ(ReadAll(P("p/two")), Pattern(2 * kMiB + 5, 2));
  char buf[16] = {};
  EXPECT_EQ(::readlink(P("p/link").c_str(), buf, sizeof(buf)), 3);
  EXPECT_EQ(::getxattr(P("p/one").c_str(), "user.k", buf, sizeof(buf)), 1);
  struct stat after {};
  ASSERT_EQ(::stat(P("p/two").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_size, before.st_size);
  EXPECT_EQ(after.st_mode, before.st_mode);
  // The backend stamps mtime when a stripe commits (like an NFS server when
  // it applies a WRITE); with coalescing and the writeback cache that can be
  // later than the write() the kernel stamped and showed before the remount.
  // Only the order is certain: not before that write, not after the remount.
  EXPECT_GE(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_LE(after.st_mtim.tv_sec, remounted.tv_sec);
}

// Bounded wait until the volume has no orphans left (the kernel sends
// FORGET/RELEASE asynchronously after close).
bool OrphansGone(Volume& v) {
  for (int i = 0; i < 100; ++i) {
    auto o = v.meta().ListOrphans();
    if (o.ok() && o->empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST_P(FsPosixTest, RemovedOpenDirectoryStaysValidWithNlinkZero) {
  // rmdir of an open directory.
  ASSERT_EQ(::mkdir(P("b").c_str(), 0755), 0);
  int fd = ::open(P("b").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::rmdir(P("b").c_str()), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);
  // Creating inside a removed directory fails as on any Linux fs.
  EXPECT_EQ(::openat(fd, "x", O_CREAT | O_WRONLY, 0644), -1);
  EXPECT_EQ(errno, ENOENT);
  ::close(fd);
  // rename(A, B) over an open directory B.
  ASSERT_EQ(::mkdir(P("A").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(P("B").c_str(), 0700), 0);
  fd = ::open(P("B").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  struct stat before {};
  ASSERT_EQ(::fstat(fd, &before), 0);
  ASSERT_EQ(::rename(P("A").c_str(), P("B").c_str()), 0);
  ASSERT_EQ(::fstat(fd, &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_ino, before.st_ino);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_nlink, 0u);
  DIR* dir = ::fdopendir(fd);  // takes fd
  ASSERT_NE(dir, nullptr);
  while (::readdir(dir) != nullptr) {
  }
  ::closedir(dir);
  struct stat now {};
  ASSERT_EQ(::stat(P("B").c_str(), &now), 0);
  EXPECT_NE(now.st_ino, before.st_ino);  // the moved A
  // Both removed directories are purged once the kernel lets go.
  EXPECT_TRUE(OrphansGone(m_->volume()));
}

TEST_P(FsPosixTest, TmpFileIsAnonymousUntilLinkedElsePurged) {
  ASSERT_EQ(::mkdir(P("t").c_str(), 0755), 0);
  auto d = Pattern(kMiB + 4321, 21);
  // Linked through /proc/self/fd: keeps its data, across a remount.
  int fd = ::open(P("t").c_str(), O_TMPFILE | O_RDWR, 0640);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  WriteAll(fd, d, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(d.size()));
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ASSERT_EQ(::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, P("t/named").c_str(),
                     AT_SYMLINK_FOLLOW),
            0)
      << std::strerror(errno);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_nlink, 1u);
  ::close(fd);
  // linkat(AT_EMPTY_PATH) names another one.
  fd = ::open(P("t").c_str(), O_TMPFILE | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  WriteAll(fd, Pattern(1000, 22), 0);
  int dirfd = ::open(P("t").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dirfd, 0);
  ASSERT_EQ(::linkat(fd, "", dirfd, "second", AT_EMPTY_PATH), 0)
      << std::strerror(errno);
  ::close(dirfd);
  ::close(fd);
  const uint64_t purged = m_->fs().counters().inodes_purged.load();
  // O_EXCL: never linkable.
  fd = ::open(P("t").c_str(), O_TMPFILE | O_RDWR | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::linkat(AT_FDCWD, ("/proc/self/fd/" + std::to_string(fd)).c_str(),
                     AT_FDCWD, P("t/never").c_str(), AT_SYMLINK_FOLLOW),
            -1);
  ::close(fd);
  // Not linked: purged, data and all, at the last close.
  fd = ::open(P("t").c_str(), O_TMPFILE | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  WriteAll(fd, Pattern(3 * kMiB, 23), 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
  EXPECT_TRUE(OrphansGone(m_->volume()));
  // The counter moves after the chunk deletes: bounded wait.
  for (int i = 0;
       i < 100 && m_->fs().counters().inodes_purged.load() < purged + 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(m_->fs().counters().inodes_purged.load(), purged + 2);
  DIR* dir = ::opendir(P("t").c_str());
  ASSERT_NE(dir, nullptr);
  std::set<std::string> names;
  while (auto* e = ::readdir(dir)) names.insert(e->d_name);
  ::closedir(dir);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "named", "second"}));
  ASSERT_TRUE(m_->Remount().ok());
  EXPECT_EQ(ReadAll(P("t/named")), d);
  EXPECT_EQ(ReadAll(P("t/second")), Pattern(1000, 22));
}

TEST_P(FsPosixTest, TmpFileOrphanDoesNotSurviveADaemonCrash) {
  ASSERT_TRUE(m_->StartDaemon().ok());
  int fd = ::open(P("").c_str(), O_TMPFILE | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  WriteAll(fd, Pattern(2 * kMiB, 24), 0);
  ASSERT_EQ(::fsync(fd), 0);  // stripes committed: an orphan with data
  Status st = m_->KillDaemon();
  ::close(fd);  // the connection is gone: nothing reaches a server
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(m_->Remount().ok());
  EXPECT_EQ(m_->fs().counters().orphans_purged_at_mount.load(), 1u);
  // Queued at mount; the OrphanPurger deletes it in the background.
  EXPECT_TRUE(OrphansGone(m_->volume()));
}

// fstat that asks the server (the kernel caches attributes for the attr
// timeout, and st_blocks changes when the server commits, not on WRITE).
int FreshStat(int fd, struct stat* st) {
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS,
              &sx) != 0) {
    return -1;
  }
  *st = {};
  st->st_size = static_cast<off_t>(sx.stx_size);
  st->st_blocks = static_cast<blkcnt_t>(sx.stx_blocks);
  st->st_nlink = sx.stx_nlink;
  st->st_mode = sx.stx_mode;
  return 0;
}

TEST_P(FsPosixTest, SparseFilesCountOnlyStoredStripes) {
  // The example: 50 KiB at 1.6 MiB (tmpfs: 104 blocks).
  const off_t off = 1677722;
  auto d = Pattern(50 * 1024, 31);
  int fd = ::open(P("sparse").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  WriteAll(fd, d, off);
  ASSERT_EQ(::fsync(fd), 0);
  struct stat st {};
  ASSERT_EQ(FreshStat(fd, &st), 0);
  const uint64_t size = off + d.size();
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), size);
  // Stripe 0 is a hole; stripe 1's data share up to EOF is stored.
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, d.size());
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, size - kMiB + 511);
  std::printf("50 KiB at 1.6 MiB: st_blocks %lld\n",
              static_cast<long long>(st.st_blocks));
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), static_cast<off_t>(kMiB));
  EXPECT_EQ(::lseek(fd, 0, SEEK_HOLE), 0);
  // Truncated, then extended: all hole.
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ASSERT_EQ(::ftruncate(fd, 8 * kMiB), 0);
  ASSERT_EQ(FreshStat(fd, &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  ::close(fd);
  // Punched: the whole stripes inside are holes, the edges zeros.
  auto model = Pattern(3 * kMiB - 100, 34);
  PutFile(P("punched"), model);
  fd = ::open(P("punched").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        kMiB / 2, 2 * kMiB),
            0)
      << std::strerror(errno);
  std::fill(model.begin() + kMiB / 2, model.begin() + kMiB / 2 + 2 * kMiB, 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        2 * kMiB, kMiB),
            0);  // to EOF: the last stripe goes too
  std::fill(model.begin() + 2 * kMiB, model.end(), 0);
  ASSERT_EQ(::fsync(fd), 0);
  ASSERT_EQ(FreshStat(fd, &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(model.size()));
  EXPECT_EQ(st.st_blocks, static_cast<blkcnt_t>(kMiB / 512));  // stripe 0
  EXPECT_EQ(::lseek(fd, 0, SEEK_HOLE), static_cast<off_t>(kMiB));
  EXPECT_EQ(::lseek(fd, kMiB, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  ::close(fd);
  EXPECT_EQ(ReadAll(P("punched")), model);
  // A dense file counts its size exactly (no parity), also after a remount.
  PutFile(P("dense"), Pattern(3 * kMiB, 32));
  PutFile(P("small"), Pattern(10, 33));
  ASSERT_TRUE(m_->Remount().ok());
  EXPECT_EQ(ReadAll(P("punched")), model);
  ASSERT_EQ(::stat(P("dense").c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, static_cast<blkcnt_t>(3 * kMiB / 512));
  ASSERT_EQ(::stat(P("small").c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 1);
  ASSERT_EQ(::stat(P("sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_blocks, 0);
}

TEST_P(FsPosixTest, RenameWhiteoutLeavesAWhiteout) {
  PutFile(P("src"), Pattern(5000, 41));
  ASSERT_EQ(::renameat2(AT_FDCWD, P("src").c_str(), AT_FDCWD, P("dst").c_str(),
                        RENAME_WHITEOUT),
            0)
      << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat(P("src").c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
  EXPECT_EQ(ReadAll(P("dst")), Pattern(5000, 41));
  // With NOREPLACE over an existing name: EEXIST, nothing changes.
  PutFile(P("src2"), Pattern(10, 42));
  EXPECT_EQ(::renameat2(AT_FDCWD, P("src2").c_str(), AT_FDCWD, P("dst").c_str(),
                        RENAME_WHITEOUT | RENAME_NOREPLACE),
            -1);
  EXPECT_EQ(errno, EEXIST);
  // Survives a remount (it is a real inode, not a cached dentry).
  ASSERT_TRUE(m_->Remount().ok());
  ASSERT_EQ(::lstat(P("src").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(0, 0));
}

// overlayfs with its upper and work directories on stripefs: deleting and
// renaming lower files leaves whiteouts in the upper layer.
TEST_P(FsPosixTest, OverlayfsUpperLayerOnStripefs) {
  char tmpl[] = "/tmp/stripefs-ovl.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  struct Cleanup {
    std::string root, merged;
    ~Cleanup() {
      ::umount2(merged.c_str(), MNT_DETACH);
      RemoveTree(root);
    }
  } cleanup{root, root + "/merged"};
  const std::string lower = root + "/lower", merged = root + "/merged";
  ASSERT_EQ(::mkdir(lower.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(merged.c_str(), 0755), 0);
  PutFile(lower + "/gone", Pattern(100, 61));
  PutFile(lower + "/moved", Pattern(200, 62));
  ASSERT_EQ(::mkdir(P("upper").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(P("work").c_str(), 0755), 0);
  const std::string opts =
      "lowerdir=" + lower + ",upperdir=" + P("upper") + ",workdir=" + P("work");
  // overlayfs refuses (EINVAL) an upper layer without RENAME_WHITEOUT and
  // O_TMPFILE support. The mount itself loads the module; only ENODEV (no
  // overlay in this kernel at all) is a skip, which the report checks.
  const int rc = ::mount("overlay", merged.c_str(), "overlay", 0, opts.c_str());
  if (rc != 0 && errno == ENODEV)
    GTEST_SKIP() << "no overlayfs in this kernel (mount: ENODEV)";
  ASSERT_EQ(rc, 0) << std::strerror(errno) << " (see dmesg)";
  ASSERT_EQ(::unlink((merged + "/gone").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::rename((merged + "/moved").c_str(), (merged + "/new").c_str()), 0)
      << std::strerror(errno);
  PutFile(merged + "/fresh", Pattern(300, 63));
  struct stat st {};
  EXPECT_EQ(::stat((merged + "/gone").c_str(), &st), -1);
  EXPECT_EQ(::stat((merged + "/moved").c_str(), &st), -1);
  EXPECT_EQ(ReadAll(merged + "/new"), Pattern(200, 62));
  EXPECT_EQ(ReadAll(merged + "/fresh"), Pattern(300, 63));
  ASSERT_EQ(::umount2(merged.c_str(), 0), 0) << std::strerror(errno);
  // The upper layer as stored: whiteouts for both lower names.
  for (const char* w : {"gone", "moved"}) {
    ASSERT_EQ(::lstat(P(std::string("upper/") + w).c_str(), &st), 0) << w;
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << w;
    EXPECT_EQ(st.st_rdev, makedev(0, 0)) << w;
  }
  EXPECT_EQ(ReadAll(P("upper/new")), Pattern(200, 62));
  EXPECT_EQ(ReadAll(P("upper/fresh")), Pattern(300, 63));
}

// The unsupported operations of docs/filesystem.md, each with its errno.
TEST_P(FsPosixTest, UnsupportedOperationsGiveTheDocumentedErrno) {
  PutFile(P("u1"), Pattern(2 * kMiB, 51));
  PutFile(P("u2"), Pattern(2 * kMiB, 52));
  int a = ::open(P("u1").c_str(), O_RDWR);
  int b = ::open(P("u2").c_str(), O_RDWR);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  auto expect_errno = [](int rc, int want, const char* what) {
    EXPECT_EQ(rc, -1) << what;
    EXPECT_EQ(errno, want) << what << ": " << std::strerror(errno);
  };
  expect_errno(::ioctl(b, FICLONE, a), EOPNOTSUPP, "FICLONE");
  struct file_clone_range cr {};
  cr.src_fd = a;
  cr.src_length = kMiB;
  expect_errno(::ioctl(b, FICLONERANGE, &cr), EOPNOTSUPP, "FICLONERANGE");
  std::vector<uint8_t> dedupe(sizeof(file_dedupe_range) +
                              sizeof(file_dedupe_range_info));
  auto* dr = reinterpret_cast<file_dedupe_range*>(dedupe.data());
  dr->src_length = kMiB;
  dr->dest_count = 1;
  dr->info[0].dest_fd = b;
  expect_errno(::ioctl(a, FIDEDUPERANGE, dr), EOPNOTSUPP, "FIDEDUPERANGE");
  expect_errno(::fallocate(a, FALLOC_FL_COLLAPSE_RANGE, 0, kMiB), EOPNOTSUPP,
               "COLLAPSE_RANGE");
  expect_errno(::fallocate(a, FALLOC_FL_INSERT_RANGE, 0, kMiB), EOPNOTSUPP,
               "INSERT_RANGE");
  expect_errno(::fallocate(a, FALLOC_FL_PUNCH_HOLE, 0, kMiB), EOPNOTSUPP,
               "PUNCH_HOLE without KEEP_SIZE");
  std::vector<uint8_t> fm(sizeof(fiemap) + sizeof(fiemap_extent));
  auto* f = reinterpret_cast<fiemap*>(fm.data());
  f->fm_length = FIEMAP_MAX_OFFSET;
  f->fm_extent_count = 1;
  expect_errno(::ioctl(a, FS_IOC_FIEMAP, f), EOPNOTSUPP, "FS_IOC_FIEMAP");
  uint32_t how = 0;  // FS_SHUTDOWN_FLAGS_DEFAULT
  expect_errno(::ioctl(a, _IOR('X', 125, uint32_t), &how), ENOTTY,
               "FS_IOC_SHUTDOWN");
  long flags = 0;
  expect_errno(::ioctl(a, FS_IOC_GETFLAGS, &flags), ENOTTY, "FS_IOC_GETFLAGS");
  // Locks are the kernel's own (local to this mount).
  EXPECT_EQ(::flock(a, LOCK_EX | LOCK_NB), 0) << std::strerror(errno);
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_len = 100;
  EXPECT_EQ(::fcntl(b, F_SETLK, &fl), 0) << std::strerror(errno);
  // copy_file_range works (the kernel copies through read/write).
  loff_t in = 0, out = 0;
  EXPECT_EQ(::copy_file_range(a, &in, b, &out, 4096, 0), 4096);
  ::close(a);
  ::close(b);
}

class FsPosixNoCoalesceTest : public FsPosixTest {
  void Customize(FsMountOptions* o) override { o->fs.coalesce = false; }
};

TEST_P(FsPosixNoCoalesceTest, SmallWritesGoStraightToTheBackend) {
  int fd = ::open(P("c").c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
  ASSERT_GE(fd, 0);
  auto d = Pattern(2 * kMiB, 11);
  for (size_t off = 0; off < d.size(); off += 100000) {
    size_t n = std::min<size_t>(100000, d.size() - off);
    ASSERT_EQ(::pwrite(fd, d.data() + off, n, off), static_cast<ssize_t>(n));
  }
  ::close(fd);
  auto s = m_->fs().StatsJson();
  EXPECT_EQ(J(s, "backend", "full_stripe_writes"), 0u);
  EXPECT_GT(
      J(s, "backend", "rmw_stripes") + J(s, "backend", "parity_delta_updates"),
      10u);
  EXPECT_EQ(s["coalescing"]["write_through"].get<uint64_t>(),
            J(s, "writes", "requests"));
  EXPECT_EQ(ReadAll(P("c")), d);
}

// StripeFs over io-uring (embedded volume), every READ for the workers
// (`--uring-lone-reads workers`): reads from threads on one CPU, O_DIRECT
// so that each is a READ. Returns the engine's stats after two passes
// over every 4 KiB block of a fresh file, all bytes checked.
fuse::EngineStats ReadTwiceOverUring(bool try_reads) {
  FsMountOptions o;
  o.transport = fuse::TransportChoice::kUring;
  o.uring_try_reads = try_reads;
  o.uring_inline_lone_reads = false;
  auto m = FsMount::Start(o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  constexpr size_t kBlock = 4096, kBlocks = 256;
  const auto data = stripefs::testing::RandomBytes(kBlock * kBlocks, 21);
  const std::string path = (*m)->Path("f");
  {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::pwrite(fd, data.data(), data.size(), 0),
              static_cast<ssize_t>(data.size()));
    EXPECT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  constexpr int kThreads = 4;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::thread> readers;
    std::vector<int> wrong(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
      readers.emplace_back([&, t] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        ::sched_setaffinity(0, sizeof(set), &set);
        int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
        void* buf = std::aligned_alloc(kBlock, kBlock);
        for (size_t i = 0; i < kBlocks; ++i) {
          const size_t b = (i * 7 + static_cast<size_t>(t) * 64) % kBlocks;
          const ssize_t n = ::pread(fd, buf, kBlock, b * kBlock);
          if (n != static_cast<ssize_t>(kBlock) ||
              std::memcmp(buf, data.data() + b * kBlock, kBlock) != 0)
            ++wrong[t];
        }
        std::free(buf);
        if (fd >= 0) ::close(fd);
      });
    }
    for (auto& r : readers) r.join();
    for (int t = 0; t < kThreads; ++t)
      EXPECT_EQ(wrong[t], 0) << "reader " << t << " pass " << pass;
  }
  return (*m)->session().Stats();
}

// A READ tried on its io-uring queue thread is served there from memory
// (the second pass: map, attributes, chunk index and page cache warm) or
// given back to the READ workers (the first pass, cold); the bytes are
// right either way.
TEST(UringStripeFsRead, TriedReadsAreServedInlineOrGivenBackToTheWorkers) {
  const std::string skip =
      BackendSkipMessage(FsBackend::kEmbedded, fuse::TransportChoice::kUring);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const fuse::EngineStats s = ReadTwiceOverUring(/*try_reads=*/true);
  RecordProperty("uring_read_tries", std::to_string(s.uring_read_tries));
  RecordProperty("uring_read_would_block",
                 std::to_string(s.uring_read_would_block));
  EXPECT_GE(s.uring_read_tries, 2u * 256);
  EXPECT_GT(s.uring_read_would_block, 0u) << "even cold reads were served";
  EXPECT_LT(s.uring_read_would_block, s.uring_read_tries)
      << "no tried READ was served on the queue thread";
}

// --uring-try-reads off: no READ is tried; all go to the workers.
TEST(UringStripeFsRead, ReadsAreNotTriedUnlessAsked) {
  const std::string skip =
      BackendSkipMessage(FsBackend::kEmbedded, fuse::TransportChoice::kUring);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const fuse::EngineStats s = ReadTwiceOverUring(/*try_reads=*/false);
  EXPECT_EQ(s.uring_read_tries, 0u);
  EXPECT_EQ(s.uring_read_would_block, 0u);
  EXPECT_GE(s.uring_reads_handed, 2u * 256);
}

// /dev/fuse on every backend; io-uring on the embedded one (the transport
// is what differs, so the clusters would only add minutes). cluster_etcd
// is the same suite with the namespace in etcd behind two metads;
// cluster_client the cluster mounted with a client identity, every chunk
// request under metad's grants.
const FsCase kCases[] = {
    {FsBackend::kEmbedded, fuse::TransportChoice::kDev},
    {FsBackend::kCluster, fuse::TransportChoice::kDev},
    {FsBackend::kClusterEtcd, fuse::TransportChoice::kDev},
    {FsBackend::kClusterClient, fuse::TransportChoice::kDev},
    {FsBackend::kEmbedded, fuse::TransportChoice::kUring},
};
std::string CaseName(const ::testing::TestParamInfo<FsCase>& i) {
  std::string name = FsBackendName(i.param.backend);
  if (i.param.transport == fuse::TransportChoice::kUring) name += "_uring";
  return name;
}
INSTANTIATE_TEST_SUITE_P(Backend, FsPosixTest, ::testing::ValuesIn(kCases),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Backend, FsPosixNoCoalesceTest,
                         ::testing::ValuesIn(kCases), CaseName);

}  // namespace
}  // namespace stripefs::fs::testing
