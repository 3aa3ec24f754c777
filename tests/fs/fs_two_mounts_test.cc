// Close-to-open between two mounts (two clients) of one real local cluster
// (`stripefs cluster up`, 6 chunkd + metad): a file written and closed on
// one mount, then opened and read on the other, reads the new data, also
// after a size change and an overwrite of a stripe the reader has cached
// (docs/filesystem.md "Read path"), and, with the writeback cache on, a
// growth at the next OPEN or attribute fetch. Skips loudly without root,
// /dev/fuse or the stripefs binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
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
using testing::FsMount;
using testing::FsMountOptions;

// Writes `data` at `offset` of `path` (created if need be), optionally
// truncating to `size` first, and closes it (close-to-open: the flush).
void WriteAndClose(const std::string& path, uint64_t offset,
                   const std::vector<uint8_t>& data, int64_t size = -1) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  if (size >= 0) {
    ASSERT_EQ(::ftruncate(fd, size), 0);
  }
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(data.size()));
  ASSERT_EQ(::close(fd), 0);
}

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_size);
}

// Opens `path`, fstat()s it (the size is returned in *size), then reads it
// whole through the same descriptor.
std::vector<uint8_t> OpenStatRead(const std::string& path, uint64_t* size) {
  std::vector<uint8_t> out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return out;
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  *size = static_cast<uint64_t>(st.st_size);
  uint8_t buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;)
    out.insert(out.end(), buf, buf + n);
  ::close(fd);
  return out;
}

// One cluster and its first mount (A) for every test of the suite; each
// test mounts its own second client (B) and uses its own file.
class FsTwoMountsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = BackendSkipMessage(FsBackend::kCluster);
    if (!skip_.empty()) return;
    FsMountOptions o;
    o.backend = FsBackend::kCluster;
    auto a = FsMount::Start(o);
    if (!a.ok()) {
      start_error_ = a.status().ToString();
      return;
    }
    a_ = std::move(*a);
  }
  static void TearDownTestSuite() { a_.reset(); }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(start_error_.empty()) << start_error_;
    ASSERT_NE(a_, nullptr);
  }
  // Path of `name` on A, and on the mount MountAgain put at `mount`.
  static std::string OnA(const std::string& name) { return a_->Path(name); }
  static std::string On(const std::string& mount, const std::string& name) {
    return a_->Path("../" + mount + "/" + name);
  }

  static inline std::unique_ptr<FsMount> a_;
  static inline std::string skip_;
  static inline std::string start_error_;
};

TEST_F(FsTwoMountsTest, WriteAndCloseOnOneOpenAndReadOnTheOther) {
  // The reader without the writeback cache: with it the kernel keeps its
  // own i_size of a cached inode and ignores the size metadata reports
  // (fuse_get_cache_mask), so another client's shrink (step 3) would not
  // show; growth is pushed (next test).
  auto b =
      a_->MountAgain("mnt-b", StripeFsOptions{}, /*writeback_cache=*/false);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const std::string on_a = OnA("f");
  const std::string path_b = On("mnt-b", "f");
  const uint64_t S = a_->volume().client().stripe_size();

  // 1. Written and closed on A: B reads it (and caches attributes and map).
  std::vector<uint8_t> model = RandomBytes(2 * S + 4096, 1);
  WriteAndClose(on_a, 0, model);
  EXPECT_EQ(ReadFileBytes(path_b), model);

  // 2. A overwrites a stripe B has cached and grows the file.
  auto patch = RandomBytes(S / 2, 2);
  WriteAndClose(on_a, 100, patch);
  std::copy(patch.begin(), patch.end(), model.begin() + 100);
  auto tail = RandomBytes(S, 3);
  WriteAndClose(on_a, model.size() + 5000, tail);
  model.resize(model.size() + 5000, 0);
  model.insert(model.end(), tail.begin(), tail.end());
  EXPECT_EQ(ReadFileBytes(path_b), model);
  EXPECT_EQ(SizeOf(path_b), model.size());

  // 3. A shrinks it and rewrites the new last stripe.
  auto last = RandomBytes(777, 4);
  WriteAndClose(on_a, S, last, static_cast<int64_t>(S + 10));
  model.resize(S + 10);
  model.resize(std::max<size_t>(model.size(), S + last.size()));
  std::copy(last.begin(), last.end(), model.begin() + static_cast<long>(S));
  // The shrink shows at the first read(2) after OPEN: with
  // FUSE_AUTO_INVAL_DATA the kernel revalidates the attributes OPEN
  // invalidated before a buffered read, instead of reading to its old
  // i_size (docs/filesystem.md, read path).
  EXPECT_EQ(ReadFileBytes(path_b), model);
  uint64_t size = 0;
  EXPECT_EQ(OpenStatRead(path_b, &size), model);
  EXPECT_EQ(size, model.size());

  // B read without writing: no writer on B.
  EXPECT_EQ((*b)->fs().live_writers(), 0u);
  ASSERT_TRUE((*b)->Stop().ok());
}

// The default mount keeps the writeback cache on, where the kernel trusts
// its own i_size of a cached inode and ignores the sizes attribute replies
// carry: another client's growth must be pushed (GrowthNotifier).
TEST_F(FsTwoMountsTest, WithTheWritebackCacheAGrowthShowsAtTheNextOpen) {
  StripeFsOptions reader;
  reader.attr_timeout = std::chrono::milliseconds(0);  // fstat asks
  auto b = a_->MountAgain("mnt-c", reader, /*writeback_cache=*/true);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE((*b)->session().negotiated().writeback_cache());
  const std::string on_a = OnA("g");
  const std::string path_b = On("mnt-c", "g");
  const uint64_t S = a_->volume().client().stripe_size();

  // 1. Written and closed on A: B reads it, so its kernel caches the inode.
  std::vector<uint8_t> model = RandomBytes(S + 4096, 1);
  WriteAndClose(on_a, 0, model);
  EXPECT_EQ(ReadFileBytes(path_b), model);

  // 2. A grows it by a stripe and a bit: B's next OPEN sees all of it.
  auto tail = RandomBytes(S + 100, 2);
  WriteAndClose(on_a, model.size(), tail);
  model.insert(model.end(), tail.begin(), tail.end());
  uint64_t size = 0;
  EXPECT_EQ(OpenStatRead(path_b, &size), model);
  EXPECT_EQ(size, model.size());
  const uint64_t shown = (*b)->fs().counters().growth_shown.load();
  EXPECT_GE(shown, 1u);

  // 3. A reader that keeps the file open read-only (tail -f) sees the
  // next growth at its next attribute fetch.
  int fd = ::open(path_b.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto more = RandomBytes(5000, 3);
  WriteAndClose(on_a, model.size(), more);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), model.size() + more.size());
  std::vector<uint8_t> got(more.size());
  EXPECT_EQ(
      ::pread(fd, got.data(), got.size(), static_cast<off_t>(model.size())),
      static_cast<ssize_t>(got.size()));
  EXPECT_EQ(got, more);
  ::close(fd);
  EXPECT_GT((*b)->fs().counters().growth_shown.load(), shown);

  // 4. B appends: A, whose cache forgot the file after its own writes
  // (the size its kernel holds is not known here), sees it at its OPEN.
  model.insert(model.end(), more.begin(), more.end());
  auto own = RandomBytes(300, 4);
  WriteAndClose(path_b, model.size(), own);
  model.insert(model.end(), own.begin(), own.end());
  EXPECT_EQ(ReadFileBytes(path_b), model);
  EXPECT_EQ(OpenStatRead(on_a, &size), model);
  EXPECT_EQ(size, model.size());

  ASSERT_TRUE((*b)->Stop().ok());
}

}  // namespace
}  // namespace stripefs::fs
