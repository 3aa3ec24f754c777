// ChunkStore on a file system that really runs full: a 4 MiB tmpfs mounted by
// the test (needs root / CAP_SYS_ADMIN; skipped loudly otherwise), always
// unmounted in TearDown.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "backend/chunk/chunk_store.h"
#include "tests/chunk/chunk_store_test_util.h"

namespace stripefs {
namespace {

using testing::CountFiles;
using testing::Payload;

class ChunkStoreFullDiskTest : public testing::TmpfsStoreTest {
 protected:
  static ChunkStoreOptions SmallStoreOptions() {
    ChunkStoreOptions o;
    o.reserve_bytes = 0;  // let the file system itself run full
    o.segment_bytes = 1 << 20;
    o.compact_bytes_per_sec = 0;  // compaction runs when a write needs it
    return o;
  }
  void OpenStore(const ChunkStoreOptions& o = SmallStoreOptions()) {
    store_.reset();
    auto s = ChunkStore::Open(mnt_ + "/store", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  // Index entries the segments account for.
  size_t LiveEntries() {
    size_t n = 0;
    for (const auto& seg : store_->Segments()) n += seg.usage.live_entries;
    return n;
  }
};

TEST_F(ChunkStoreFullDiskTest, FullDiskIsEnospcNothingHalfWrittenVisible) {
  Mount("size=4m");
  if (IsSkipped()) return;
  OpenStore();
  constexpr size_t kChunk = 256 << 10;
  std::vector<ChunkId> stored;
  Status failure;
  ChunkId failed_id;
  for (uint64_t i = 0; i < 64; ++i) {  // 64 * 256 KiB = 4x the fs size
    ChunkId id{1, i, 0};
    Status st = store_->WriteChunk(id, 1, Payload(kChunk, i));
    if (!st.ok()) {
      failure = st;
      failed_id = id;
      break;
    }
    stored.push_back(id);
  }
  ASSERT_FALSE(failure.ok()) << "a 4 MiB tmpfs never ran full";
  EXPECT_EQ(failure.code(), ENOSPC) << failure.ToString();
  EXPECT_NE(failure.message().find(mnt_ + "/store"), std::string::npos)
      << failure.message();
  EXPECT_NE(failure.message().find("full"), std::string::npos);
  ASSERT_GE(stored.size(), 4u);
  EXPECT_GE(store_->Counters().nospace_refusals, 1u);

  // Nothing of the failed write is visible or left behind.
  EXPECT_EQ(store_->ReadChunk(failed_id, 1, 0, 1).status().code(), ENOENT);
  EXPECT_EQ(store_->Locate(failed_id, 1).status().code(), ENOENT);
  EXPECT_EQ(LiveEntries(), stored.size());
  EXPECT_EQ(store_->Stats()->chunks, stored.size());

  // Everything acknowledged still reads back.
  for (size_t i = 0; i < stored.size(); ++i) {
    auto got = store_->ReadChunk(stored[i], 1, 0, kChunk);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(kChunk, stored[i].stripe));
  }

  // Freeing space makes writes work again (index included).
  ASSERT_TRUE(store_->DeleteChunk(stored.back(), 0).ok());
  ASSERT_TRUE(store_->DeleteChunk(stored[0], 0).ok());
  Status again = store_->WriteChunk(failed_id, 1, Payload(kChunk, 777));
  ASSERT_TRUE(again.ok()) << again.ToString();
  EXPECT_EQ(*store_->ReadChunk(failed_id, 1, 0, kChunk), Payload(kChunk, 777));

  // And all of it survives a reopen.
  OpenStore();
  EXPECT_EQ(store_->Stats()->chunks, stored.size() - 1);
  for (size_t i = 1; i + 1 < stored.size(); ++i) {
    auto got = store_->ReadChunk(stored[i], 1, 0, kChunk);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(kChunk, stored[i].stripe));
  }
  EXPECT_EQ(*store_->ReadChunk(failed_id, 1, 0, kChunk), Payload(kChunk, 777));
}

TEST_F(ChunkStoreFullDiskTest, TinyWritesOnAFullDiskFailCleanlyAndRecover) {
  Mount("size=4m");
  if (IsSkipped()) return;
  OpenStore();
  // Fill with big chunks, then with ever smaller ones, so that the last
  // failures hit every step (segment preallocation, data, index WAL).
  std::vector<std::pair<ChunkId, size_t>> stored;
  std::vector<Status> failures;
  uint64_t n = 0;
  for (size_t size : {size_t{256} << 10, size_t{16} << 10, size_t{512},
                      size_t{1}, size_t{0}}) {
    for (int i = 0; i < 5000; ++i, ++n) {
      ChunkId id{n % 7 + 1, n, static_cast<uint32_t>(n % 6)};
      Status st = store_->WriteChunk(id, 1, Payload(size, n));
      if (!st.ok()) {
        EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
        EXPECT_EQ(store_->ReadChunk(id, 1, 0, 0).status().code(), ENOENT);
        failures.push_back(st);
        if (failures.size() % 3 == 0) break;  // a few tries per size
        continue;
      }
      stored.push_back({id, size});
    }
  }
  ASSERT_FALSE(failures.empty());
  // Empty chunks need no data pages: they go on until the index (RocksDB
  // WAL) runs out of space, which the index reserve (given up on the first
  // failed index write) pushes past the few thousand tried here.
  size_t data_stage = 0, index_stage = 0;
  for (const auto& f : failures) {
    if (f.message().find("chunk index of") != std::string::npos) {
      ++index_stage;
    } else {
      ++data_stage;
    }
  }
  std::cerr << "refusals: " << data_stage << " writing data, " << index_stage
            << " writing the index\n";
  EXPECT_GE(data_stage, 1u);
  size_t nonempty = 0;
  for (const auto& st : stored) nonempty += st.second > 0;
  EXPECT_EQ(LiveEntries(), nonempty);  // empty chunks need no extent
  EXPECT_EQ(store_->Stats()->chunks, stored.size());
  for (const auto& [id, size] : stored) {
    auto got = store_->ReadChunk(id, 1, 0, static_cast<uint32_t>(size));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(size, id.stripe));
  }
  // Free a lot, then writes (and the index) work again.
  for (size_t i = 0; i < stored.size() && i < 8; ++i) {
    Status del = store_->DeleteChunk(stored[i].first, 0);
    ASSERT_TRUE(del.ok()) << del.ToString();
  }
  Status again = store_->WriteChunk({99, 1, 1}, 1, Payload(4096, 5));
  ASSERT_TRUE(again.ok()) << again.ToString();
  OpenStore();
  EXPECT_EQ(*store_->ReadChunk({99, 1, 1}, 1, 0, 4096), Payload(4096, 5));
}

TEST_F(ChunkStoreFullDiskTest, ReserveRefusesBeforeTheDiskIsFull) {
  Mount("size=4m");
  if (IsSkipped()) return;
  store_.reset();
  ChunkStoreOptions o = SmallStoreOptions();
  o.reserve_bytes = 2 << 20;
  auto s = ChunkStore::Open(mnt_ + "/store", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(s).value();
  size_t ok = 0;
  Status failure;
  for (uint64_t i = 0; i < 64 && failure.ok(); ++i) {
    failure = store_->WriteChunk({2, i, 1}, 1, Payload(256 << 10, i));
    if (failure.ok()) ++ok;
  }
  EXPECT_EQ(failure.code(), ENOSPC) << failure.ToString();
  EXPECT_NE(failure.message().find("reserved"), std::string::npos);
  auto st = store_->Stats();
  ASSERT_TRUE(st.ok());
  // Refused while the reserve was still free.
  EXPECT_GE(st->bytes_free + (256 << 10), o.reserve_bytes);
  EXPECT_EQ(st->chunks, ok);
  EXPECT_EQ(LiveEntries(), ok);
}

// Overwrites (new version, old one deleted: what the stripe client does) of
// 10x the file system's size never end in ENOSPC: deleted versions are
// punched out or, without hole punching, compacted away.
void OverwriteTenTimes(ChunkStore* store, uint64_t fs_bytes) {
  constexpr size_t kChunk = 128 << 10;
  constexpr uint64_t kLive = 6;  // 768 KiB live at any time
  uint64_t written = 0;
  for (uint64_t version = 1; written < 10 * fs_bytes; ++version) {
    for (uint64_t c = 0; c < kLive; ++c) {
      ChunkId id{3, c, 0};
      Status st =
          store->WriteChunk(id, version, Payload(kChunk, version * 7 + c));
      ASSERT_TRUE(st.ok()) << "after " << written
                           << " bytes: " << st.ToString();
      ASSERT_TRUE(store->DeleteChunk(id, version).ok());
      written += kChunk;
    }
    for (uint64_t c = 0; c < kLive; c += 5) {
      auto got = store->ReadChunk({3, c, 0}, version, 0, kChunk);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(*got, Payload(kChunk, version * 7 + c));
    }
  }
}

TEST_F(ChunkStoreFullDiskTest, OverwritingTenTimesTheDiskNeverRunsFull) {
  Mount("size=4m");
  if (IsSkipped()) return;
  OpenStore();
  OverwriteTenTimes(store_.get(), 4 << 20);
  if (HasFatalFailure()) return;
  EXPECT_GE(store_->Counters().holes_punched, 1u);
  EXPECT_EQ(store_->Stats()->chunks, 6u);
}

TEST_F(ChunkStoreFullDiskTest, WithoutHolePunchingCompactionKeepsUp) {
  Mount("size=4m");
  if (IsSkipped()) return;
  ChunkStoreOptions o = SmallStoreOptions();
  o.punch_holes = false;
  OpenStore(o);
  OverwriteTenTimes(store_.get(), 4 << 20);
  if (HasFatalFailure()) return;
  auto c = store_->Counters();
  EXPECT_EQ(c.holes_punched, 0u);
  EXPECT_GE(c.segments_removed, 1u);
  OpenStore(o);
  EXPECT_EQ(store_->Stats()->chunks, 6u);
}

TEST_F(ChunkStoreFullDiskTest, ReadOnlyFileSystemIsRefusedClearly) {
  Mount("size=1m,ro");
  if (IsSkipped()) return;
  auto s = ChunkStore::Open(mnt_, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), EROFS) << s.status().ToString();
  EXPECT_NE(s.status().message().find("not writable"), std::string::npos);
}

}  // namespace
}  // namespace stripefs
