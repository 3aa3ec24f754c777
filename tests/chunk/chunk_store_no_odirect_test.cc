// ChunkStore on a file system that refuses O_DIRECT only after creating the
// file (ramfs; tmpfs before Linux 6.6, e.g. Debian 12's 6.1): segments must
// fall back to buffered writes instead of failing with EEXIST. Mounts a ramfs
// (needs root / CAP_SYS_ADMIN; skipped loudly otherwise), always unmounted in
// TearDown.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_store_test_util.h"

namespace stripefs {
namespace {

using testing::Payload;

class ChunkStoreNoDirectIoTest : public testing::TmpfsStoreTest {};

TEST_F(ChunkStoreNoDirectIoTest, SegmentsFallBackToBufferedWrites) {
  Mount("", "ramfs");
  if (IsSkipped()) return;
  // The premise: this file system creates the file, then refuses O_DIRECT.
  const std::string probe = mnt_ + "/probe";
  ASSERT_LT(::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0644),
            0);
  ASSERT_EQ(errno, EINVAL);
  ASSERT_EQ(::access(probe.c_str(), F_OK), 0);

  ChunkStoreOptions o;
  o.reserve_bytes = 0;
  o.segment_bytes = 1 << 20;
  o.use_direct_io = true;
  auto s = ChunkStore::Open(mnt_ + "/store", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(s).value();
  constexpr size_t kChunk = 256 << 10;
  for (uint64_t i = 0; i < 8; ++i) {  // 2 MiB: more than one segment
    Status st = store_->WriteChunk(ChunkId{1, i, 0}, 1, Payload(kChunk, i));
    ASSERT_TRUE(st.ok()) << "chunk " << i << ": " << st.ToString();
  }
  for (uint64_t i = 0; i < 8; ++i) {
    auto got = store_->ReadChunk(ChunkId{1, i, 0}, 1, 0, kChunk);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(kChunk, i)) << "chunk " << i;
  }
}

}  // namespace
}  // namespace stripefs
