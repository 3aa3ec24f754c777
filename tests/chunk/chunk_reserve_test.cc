// The chunk store's default reserve scales with its file system: a small
// fixed floor plus a share of the capacity (ScaledChunkReserve), reported by
// Stats() with the file system's size and id. On a 64 MiB tmpfs mounted by
// the test (root; skipped loudly otherwise), always unmounted.
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_store_test_util.h"

namespace stripefs {
namespace {

using testing::Payload;

constexpr uint64_t kMiB = 1 << 20;

TEST(ChunkReserveTest, ScalesWithCapacityAboveAFloor) {
  EXPECT_EQ(ScaledChunkReserve(0), kChunkReserveFloorBytes);
  EXPECT_EQ(ScaledChunkReserve(64 * kMiB), 4 * kMiB + 64 * kMiB / 100);
  const uint64_t tib = uint64_t{1} << 40;
  EXPECT_EQ(ScaledChunkReserve(tib), 4 * kMiB + tib / 100);
}

class ChunkReserveMountTest : public testing::TmpfsStoreTest {
 protected:
  void SetUp() override { Mount("size=64m"); }
};

TEST_F(ChunkReserveMountTest, DefaultReserveIsScaledReportedAndEnforced) {
  auto s = ChunkStore::Open(mnt_ + "/store");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(s).value();
  struct statvfs v {};
  ASSERT_EQ(::statvfs(mnt_.c_str(), &v), 0);
  const uint64_t want = ScaledChunkReserve(64 * kMiB);
  EXPECT_EQ(store_->reserve_bytes(), want);
  auto st = store_->Stats();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->bytes_capacity, 64 * kMiB);
  EXPECT_EQ(st->bytes_reserved, want);
  EXPECT_EQ(st->fs_id, static_cast<uint64_t>(v.f_fsid));

  // 1 MiB chunks until refused: refused at the reserve, not at a full disk,
  // and everything short of the reserve was usable.
  int stored = 0;
  Status failure;
  for (uint64_t i = 0; i < 128 && failure.ok(); ++i) {
    failure = store_->WriteChunk(ChunkId{1, i, 0}, 1, Payload(kMiB, i));
    if (failure.ok()) ++stored;
  }
  ASSERT_FALSE(failure.ok()) << "128 MiB fit into a 64 MiB tmpfs";
  EXPECT_EQ(failure.code(), ENOSPC) << failure.ToString();
  EXPECT_NE(failure.message().find("reserved"), std::string::npos);
  st = store_->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_GE(st->bytes_free + kMiB, want) << "refused inside the reserve";
  EXPECT_GE(stored * kMiB, 64 * kMiB - want - 2 * kMiB) << stored;
}

}  // namespace
}  // namespace stripefs
