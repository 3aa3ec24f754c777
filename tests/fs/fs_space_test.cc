// Space accounting through a real mount on a small volume: the volume lives
// in a 64 MiB tmpfs (embedded directory, or the whole local cluster's
// directory). statfs reports the volume's own capacity and free space (file
// system less the chunk store reserve, times k/(k+m)); the volume takes at
// least 30 MiB of file data; a full volume gets ENOSPC without losing
// fsync'd data; deleting frees space for new writes. Root + /dev/fuse
// (skipped loudly otherwise). Test names end in /embedded or /cluster.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_store.h"
#include "tests/fs/fs_mount.h"
#include "tests/support/file_bytes.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fs::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeMiB = 64;
constexpr size_t kFileBytes = 4 * kMiB;
constexpr int kMaxFiles = 32;  // 128 MiB: more than the volume can hold

// Deterministic test payload (tests/support/random_bytes.h).
std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  return stripefs::testing::RandomBytes(n, seed);
}

// Writes `d` to a new file and fsyncs it: 0, or the errno of the first
// failing write, fsync or close.
int PutSynced(const std::string& path, const std::vector<uint8_t>& d) {
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  int err = 0;
  while (done < d.size()) {
    ssize_t n = ::write(fd, d.data() + done, d.size() - done);
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  return stripefs::testing::ReadFileBytes(path);
}

struct Space {
  uint64_t total = 0, avail = 0;
};
Space StatSpace(const std::string& path) {
  struct statvfs v {};
  EXPECT_EQ(::statvfs(path.c_str(), &v), 0)
      << path << ": " << std::strerror(errno);
  return {uint64_t{v.f_blocks} * v.f_frsize, uint64_t{v.f_bavail} * v.f_frsize};
}

class FsSpaceTest : public ::testing::TestWithParam<FsBackend> {
 protected:
  void SetUp() override {
    const std::string skip = BackendSkipMessage(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
    FsMountOptions o;
    o.backend = GetParam();
    o.space_limit_mib = kVolumeMiB;
    auto m = FsMount::Start(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
  }
  void TearDown() override { m_.reset(); }
  std::string P(const std::string& rel) { return m_->Path(rel); }
  std::unique_ptr<FsMount> m_;
};

TEST_P(FsSpaceTest, StatfsReportsTheVolumesOwnSpace) {
  const Space raw = StatSpace(m_->volume_dir());
  const Space vol = StatSpace(m_->mnt());
  // Every chunk store of the volume shares the one tmpfs (the cluster's six
  // chunkd too): it counts once, less one reserve, times 4/6.
  const uint64_t reserve = ScaledChunkReserve(raw.total);
  EXPECT_EQ(raw.total, kVolumeMiB * kMiB);
  EXPECT_NEAR(static_cast<double>(vol.total),
              static_cast<double>((raw.total - reserve) / 6 * 4), 8192.0);
  // Free space moves with the other processes' logs: within 1 MiB.
  EXPECT_NEAR(static_cast<double>(vol.avail),
              static_cast<double>((raw.avail - reserve) / 6 * 4),
              static_cast<double>(kMiB));
  EXPECT_LE(vol.avail, vol.total);
  EXPECT_GE(vol.avail, 30 * kMiB) << "an empty 64 MiB volume";
}

TEST_P(FsSpaceTest, FullVolumeGetsEnospcAndDeletingFreesSpace) {
  // Fill with fsync'd 4 MiB files until the volume refuses one.
  int written = 0, err = 0;
  for (; written < kMaxFiles; ++written) {
    err = PutSynced(P("f" + std::to_string(written)),
                    Pattern(kFileBytes, written));
    if (err != 0) break;
  }
  ASSERT_LT(written, kMaxFiles) << "128 MiB fit into a 64 MiB volume";
  EXPECT_EQ(err, ENOSPC) << std::strerror(err);
  ASSERT_GE(written * kFileBytes, 30 * kMiB)
      << "a 64 MiB volume took only " << written << " files of 4 MiB";
  const Space full = StatSpace(m_->mnt());
  std::printf(
      "64 MiB volume: %d files of 4 MiB fsync'd before %s; statfs "
      "then: %llu of %llu bytes free\n",
      written, std::strerror(err), static_cast<unsigned long long>(full.avail),
      static_cast<unsigned long long>(full.total));
  EXPECT_LT(full.avail, kFileBytes + kMiB) << "statfs after ENOSPC";
  // Nothing fsync'd was lost.
  for (int i = 0; i < written; ++i) {
    ASSERT_EQ(ReadAll(P("f" + std::to_string(i))), Pattern(kFileBytes, i))
        << "f" << i;
  }

  // Delete the refused file and half of the others; their chunks go.
  ASSERT_EQ(::unlink(P("f" + std::to_string(written)).c_str()), 0);
  const int removed = written / 2;
  for (int i = 0; i < removed; ++i)
    ASSERT_EQ(::unlink(P("f" + std::to_string(i)).c_str()), 0);
  // Purging follows the kernel's FORGET: wait for it (bounded). The full
  // volume may have dipped into the reserve by the metadata it wrote, so
  // count on one file less than was deleted.
  const int refill = removed - 1;
  Space after{};
  for (int i = 0; i < 600; ++i) {
    after = StatSpace(m_->mnt());
    if (after.avail >= refill * kFileBytes + kMiB) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(after.avail, refill * kFileBytes + kMiB);

  // New writes fit again, and read back.
  for (int i = 0; i < refill; ++i) {
    const std::string name = "g" + std::to_string(i);
    ASSERT_EQ(PutSynced(P(name), Pattern(kFileBytes, 1000 + i)), 0)
        << name << ": " << std::strerror(errno);
  }
  for (int i = 0; i < refill; ++i) {
    EXPECT_EQ(ReadAll(P("g" + std::to_string(i))),
              Pattern(kFileBytes, 1000 + i));
  }
  for (int i = removed; i < written; ++i) {
    EXPECT_EQ(ReadAll(P("f" + std::to_string(i))), Pattern(kFileBytes, i));
  }
}

TEST(FsSpace, EmptyEmbeddedVolumeTakesLittleSpace) {
  std::string why = MountSkipReason();
  if (!why.empty()) GTEST_SKIP() << "SKIPPED (cannot mount here): " << why;
  FsMountOptions o;
  o.space_limit_mib = kVolumeMiB;
  auto m = FsMount::Start(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Space raw = StatSpace((*m)->volume_dir());
  const uint64_t used = raw.total - raw.avail;
  std::printf("empty embedded volume: %llu bytes\n",
              static_cast<unsigned long long>(used));
  // The metadata RocksDB and 6 chunk indexes, no preallocated logs, plus
  // each chunk store's 1 MiB index reserve (docs/chunk-store.md).
  EXPECT_LT(used, 6 * kMiB + 2 * kMiB)
      << "an empty embedded volume takes " << used << " bytes";
}

INSTANTIATE_TEST_SUITE_P(Backends, FsSpaceTest,
                         ::testing::Values(FsBackend::kEmbedded,
                                           FsBackend::kCluster),
                         [](const auto& info) {
                           return std::string(FsBackendName(info.param));
                         });

}  // namespace
}  // namespace stripefs::fs::testing
