// The segment engine: group commit, compaction with concurrent reads, and
// stores written by the one-file-per-version release.
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_store.h"
#include "ec/crc32c.h"
#include "tests/chunk/chunk_store_files.h"
#include "tests/chunk/chunk_store_test_util.h"
#include "tests/support/eventually.h"

namespace stripefs {
namespace {

using testing::CountFiles;
using testing::Payload;
using testing::TempDir;
using testing::WriteLegacyStore;

ChunkStoreOptions EngineOptions() {
  ChunkStoreOptions o;
  o.reserve_bytes = 0;
  o.segment_bytes = 256 << 10;
  o.compact_bytes_per_sec = 0;  // tests compact explicitly
  return o;
}

Result<std::unique_ptr<ChunkStore>> OpenStore(
    const std::string& dir, const ChunkStoreOptions& o = EngineOptions()) {
  return ChunkStore::Open(dir, o);
}

TEST(ChunkEngine, GroupCommitSharesSyncsAcrossWriters) {
  TempDir tmp;
  auto s = OpenStore(tmp.path() + "/store");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& store = *s;
  constexpr int kThreads = 8, kPerThread = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t n = static_cast<uint64_t>(t * kPerThread + i);
        if (!store->WriteChunk({1, n, 0}, 1, Payload(30000 + n, n)).ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_EQ(failures.load(), 0);
  for (uint64_t n = 0; n < kThreads * kPerThread; ++n) {
    auto got = store->ReadChunk({1, n, 0}, 1, 0, 30000 + n);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(*got, Payload(30000 + n, n));
  }
  const auto c = store->Counters();
  std::printf("%" PRIu64 " writes in %" PRIu64 " group commits, %" PRIu64
              " segment syncs, %" PRIu64 " index syncs\n",
              c.committed_ops, c.commit_batches, c.data_syncs, c.index_syncs);
  EXPECT_EQ(c.committed_ops, uint64_t{kThreads * kPerThread});
  // One synced WriteBatch per batch, at most one fdatasync per segment a
  // batch touched (so never more than one per write).
  EXPECT_EQ(c.index_syncs, c.commit_batches);
  EXPECT_LE(c.data_syncs, c.committed_ops);
  EXPECT_LE(c.commit_batches, c.committed_ops);
  // The timing counters: one data write per chunk, and an op's wait for its
  // acknowledgement includes its wait for a batch and that batch's time.
  EXPECT_EQ(c.data_writes, uint64_t{kThreads * kPerThread});
  EXPECT_GE(c.commit_wait_ns, c.queue_ns);
  EXPECT_GE(c.commit_wait_ns, c.batch_ns);
  EXPECT_GT(c.data_sync_ns, 0u);
  EXPECT_GT(c.index_sync_ns, 0u);
}

// The race forced instead of hoped for: the committer holds its first batch
// (one write) until 7 more writers are queued behind it; those 7 must go
// down as one batch with one synced index write.
TEST(ChunkEngine, WritersQueuedBehindABatchShareTheNextOne) {
  TempDir tmp;
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, holding = false, release = false;
  std::vector<size_t> sizes;
  ChunkStoreOptions o = EngineOptions();
  o.before_commit_batch = [&](size_t ops) {
    std::unique_lock<std::mutex> lock(mu);
    if (!armed) return;
    sizes.push_back(ops);
    if (sizes.size() == 1) {
      holding = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
  };
  auto s = OpenStore(tmp.path() + "/store", o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& store = *s;
  const auto before = store->Counters();
  {
    std::lock_guard<std::mutex> lock(mu);
    armed = true;
  }
  constexpr int kQueued = 7;
  std::atomic<int> failures{0};
  auto write = [&](uint64_t n) {
    if (!store->WriteChunk({2, n, 0}, 1, Payload(20000 + n, n)).ok())
      ++failures;
  };
  std::vector<std::thread> writers;
  writers.emplace_back(write, 0);
  bool held;
  {
    std::unique_lock<std::mutex> lock(mu);
    held = cv.wait_for(lock, std::chrono::seconds(60), [&] { return holding; });
  }
  if (held) {
    for (int t = 1; t <= kQueued; ++t)
      writers.emplace_back(write, static_cast<uint64_t>(t));
  }
  const bool queued =
      held && stripefs::testing::Eventually(
                  [&] { return store->queued_commit_ops() == size_t{kQueued}; },
                  std::chrono::seconds(60));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  for (auto& w : writers) w.join();
  ASSERT_TRUE(held) << "the committer never took the first write";
  ASSERT_TRUE(queued) << "only " << store->queued_commit_ops()
                      << " writes queued behind the held batch";
  ASSERT_EQ(failures.load(), 0);
  const auto c = store->Counters();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(sizes, (std::vector<size_t>{1, size_t{kQueued}}));
  }
  EXPECT_EQ(c.committed_ops - before.committed_ops, uint64_t{kQueued + 1});
  EXPECT_EQ(c.commit_batches - before.commit_batches, 2u);
  EXPECT_EQ(c.index_syncs - before.index_syncs, 2u);
  for (uint64_t n = 0; n <= kQueued; ++n) {
    auto got = store->ReadChunk({2, n, 0}, 1, 0, 20000 + n);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(20000 + n, n));
  }
}

TEST(ChunkEngine, DeleteChunkVersionsIsOneCommit) {
  TempDir tmp;
  auto s = OpenStore(tmp.path() + "/store");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto& store = *s;
  // 40 chunks, two versions each; delete version 1 of all and version 2 of
  // the even ones (plus an absent version) in one call.
  std::vector<ChunkVersion> doomed;
  for (uint64_t n = 0; n < 40; ++n) {
    for (uint64_t v : {1, 2})
      ASSERT_TRUE(store->WriteChunk({4, n, 1}, v, Payload(5000, n + v)).ok());
    doomed.push_back({{4, n, 1}, 1});
    if (n % 2 == 0) doomed.push_back({{4, n, 1}, 2});
  }
  doomed.push_back({{4, 99, 1}, 7});
  const auto before = store->Counters();
  ASSERT_TRUE(store->DeleteChunkVersions(doomed).ok());
  const auto after = store->Counters();
  EXPECT_EQ(after.commit_batches - before.commit_batches, 1u);
  EXPECT_EQ(after.index_syncs - before.index_syncs, 1u);
  EXPECT_EQ(store->Stats()->chunks, 20u);
  for (uint64_t n = 0; n < 40; ++n) {
    EXPECT_EQ(store->ReadChunk({4, n, 1}, 1, 0, 1).status().code(), ENOENT);
    auto v2 = store->ReadChunk({4, n, 1}, 2, 0, 5000);
    if (n % 2 == 0) {
      EXPECT_EQ(v2.status().code(), ENOENT);
    } else {
      ASSERT_TRUE(v2.ok()) << v2.status().ToString();
      EXPECT_EQ(*v2, Payload(5000, n + 2));
    }
  }
}

// Waits (bounded) until the store's filler has made `n` spares.
bool WaitForSpares(ChunkStore& store, uint64_t n) {
  for (int i = 0; i < 1000 && store.Counters().spares_filled < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return store.Counters().spares_filled >= n;
}

TEST(ChunkEngine, SegmentsStartFromZeroFilledSpares) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  ChunkStoreOptions o = EngineOptions();
  o.spare_segments = 1;
  {
    auto s = OpenStore(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    // 100 KiB chunks: two fit a 256 KiB segment. The first two segments
    // are preallocated (the filler starts once a store fills a segment),
    // the next five start from spares.
    for (uint64_t n = 0; n < 4; ++n)
      ASSERT_TRUE(store->WriteChunk({2, n, 0}, 1, Payload(100000, n)).ok());
    EXPECT_EQ(store->Counters().segments_from_spares, 0u);
    ASSERT_TRUE(WaitForSpares(*store, 1)) << "no spare after 10 s";
    for (uint64_t n = 4; n < 14; ++n) {
      ASSERT_TRUE(store->WriteChunk({2, n, 0}, 1, Payload(100000, n)).ok());
      if (n % 2 == 1) {
        ASSERT_TRUE(WaitForSpares(*store, (n - 5) / 2 + 2));
      }
    }
    EXPECT_EQ(store->Counters().segments_from_spares, 5u);
    for (uint64_t n = 0; n < 14; ++n) {
      auto got = store->ReadChunk({2, n, 0}, 1, 0, 100000);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, Payload(100000, n));
    }
  }
  // A spare left by the last run is taken again; an unfinished one (tmp)
  // is removed; chunks in segments that began as spares survive a reopen.
  EXPECT_EQ(CountFiles(dir + "/segments", ".spare"), 1u);
  std::ofstream(dir + "/segments/00000000000000ff.spare.tmp") << "half";
  auto s = OpenStore(dir, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(CountFiles(dir + "/segments", ".spare.tmp") +
                CountFiles(dir + "/segments", ".spare"),
            1u);
  ASSERT_TRUE((*s)->WriteChunk({3, 0, 0}, 1, Payload(200000, 7)).ok());
  EXPECT_EQ((*s)->Counters().segments_from_spares, 1u);
  for (uint64_t n = 0; n < 14; ++n) {
    auto got = (*s)->ReadChunk({2, n, 0}, 1, 0, 100000);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(100000, n));
  }
}

TEST(ChunkEngine, CompactionMovesLiveChunksWhileReadsRun) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  ChunkStoreOptions o = EngineOptions();
  o.punch_holes = false;  // all space comes back through compaction
  auto s = OpenStore(dir, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto store = std::move(s).value();
  constexpr uint64_t kChunks = 48;
  constexpr size_t kSize = 20000;  // 12 per 256 KiB segment
  for (uint64_t n = 0; n < kChunks; ++n) {
    ASSERT_TRUE(store->WriteChunk({2, n, 1}, 5, Payload(kSize, n)).ok());
  }
  std::vector<uint64_t> live;
  for (uint64_t n = 0; n < kChunks; ++n) {
    if (n % 4 == 0) {
      live.push_back(n);
    } else {
      ASSERT_TRUE(store->DeleteChunk({2, n, 1}, 0).ok());
    }
  }
  // A clone shares its source's extent; compaction must move both together.
  ASSERT_TRUE(store->CloneChunk({2, 0, 1}, 5, 6, kSize).ok());
  const size_t segments_before = store->Segments().size();
  ASSERT_GE(segments_before, 4u);

  std::atomic<bool> done{false};
  std::atomic<int> read_errors{0};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      for (size_t i = static_cast<size_t>(r); !done.load(); ++i) {
        const uint64_t n = live[i % live.size()];
        auto got = store->ReadChunk({2, n, 1}, 5, 0, kSize);
        if (!got.ok() || *got != Payload(kSize, n)) ++read_errors;
        ++reads;
      }
    });
  }
  auto rep = store->Compact(false);
  done = true;
  for (auto& t : readers) t.join();
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(read_errors.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GE(rep->segments_compacted, 3u);
  EXPECT_GE(rep->chunks_moved, 9u);
  EXPECT_EQ(rep->unreadable, 0u);
  EXPECT_LT(store->Segments().size(), segments_before);
  auto a = store->Locate({2, 0, 1}, 5), b = store->Locate({2, 0, 1}, 6);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->path, b->path);
  EXPECT_EQ(a->offset, b->offset);
  // Everything still there, also after a reopen; nothing dead left behind in
  // the compacted segments.
  store.reset();
  s = OpenStore(dir, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store = std::move(s).value();
  for (uint64_t n : live) {
    auto got = store->ReadChunk({2, n, 1}, 5, 0, kSize);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(kSize, n));
  }
  EXPECT_EQ(*store->ReadChunk({2, 0, 1}, 6, 0, kSize), Payload(kSize, 0));
  EXPECT_EQ(store->Stats()->chunks, live.size() + 1);
}

TEST(ChunkEngine, LegacyStoreOpensAndServesItsChunks) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/old";
  std::vector<std::pair<ChunkId, size_t>> chunks;
  for (uint64_t n = 0; n < 6; ++n) {
    chunks.push_back(
        {{7, n * 5000, static_cast<uint32_t>(n)}, 1000 + n * 9000});
  }
  WriteLegacyStore(dir, chunks);
  if (::testing::Test::HasFatalFailure()) return;
  auto s = OpenStore(dir);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto store = std::move(s).value();
  EXPECT_EQ(store->Stats()->chunks, chunks.size());
  for (const auto& [id, size] : chunks) {
    auto got = store->ReadChunk(id, 1, 0, static_cast<uint32_t>(size));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(size, id.stripe));
    auto loc = store->Locate(id, 1);
    ASSERT_TRUE(loc.ok());
    EXPECT_FALSE(loc->in_segment);
  }
  // The marker now keeps older builds out (they would misread segments).
  std::string marker;
  std::getline(std::ifstream(dir + "/CHUNKSTORE"), marker);
  EXPECT_EQ(marker, "stripefs chunk store 2");

  const ChunkId rewrite = chunks[0].first, gone = chunks[1].first,
                cloned = chunks[2].first;
  const std::string old_file = store->Locate(rewrite, 1)->path;
  const std::string gone_file = store->Locate(gone, 1)->path;
  // A repair rewrite moves the version into a segment, its file goes.
  ASSERT_TRUE(
      store->WriteChunk(rewrite, 1, Payload(chunks[0].second, rewrite.stripe))
          .ok());
  EXPECT_TRUE(store->Locate(rewrite, 1)->in_segment);
  EXPECT_FALSE(std::filesystem::exists(old_file));
  ASSERT_TRUE(store->DeleteChunk(gone, 0).ok());
  EXPECT_FALSE(std::filesystem::exists(gone_file));
  // A clone of a legacy file is a copy into a segment.
  const auto csize = static_cast<uint32_t>(chunks[2].second);
  ASSERT_TRUE(store->CloneChunk(cloned, 1, 2, csize).ok());
  EXPECT_TRUE(store->Locate(cloned, 2)->in_segment);
  EXPECT_EQ(store->Counters().clones_shared, 0u);
  // New chunks go to segments next to the old files.
  ASSERT_TRUE(store->WriteChunk({8, 1, 1}, 3, Payload(5000, 8)).ok());

  store.reset();
  s = OpenStore(dir);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store = std::move(s).value();
  EXPECT_EQ(store->Counters().orphans_removed, 0u);
  EXPECT_EQ(store->Counters().missing_chunks, 0u);
  EXPECT_EQ(store->Stats()->chunks, chunks.size() + 1);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& [id, size] = chunks[i];
    auto got = store->ReadChunk(id, 1, 0, static_cast<uint32_t>(size));
    if (id == gone) {
      EXPECT_EQ(got.status().code(), ENOENT);
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(size, id.stripe));
  }
  EXPECT_EQ(*store->ReadChunk(cloned, 2, 0, csize),
            Payload(csize, cloned.stripe));
  EXPECT_EQ(*store->ReadChunk({8, 1, 1}, 3, 0, 5000), Payload(5000, 8));
  // Range reads of a legacy file verify its block CRCs too.
  const auto& [last, last_size] = chunks.back();
  testing::FlipBits(store->Locate(last, 1)->path, 5000, 0x02);
  EXPECT_EQ(store->ReadChunk(last, 1, 4096, 100).status().code(), EBADMSG);
  EXPECT_TRUE(store->ReadChunk(last, 1, 8192, 100).ok());
}

}  // namespace
}  // namespace stripefs
