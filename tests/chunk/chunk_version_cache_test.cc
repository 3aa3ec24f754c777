// The chunk store's version cache (chunk_version_cache.h): it never
// disagrees with the index, whatever path changed the index, with the
// default bound, a tiny one (evicting all the time) and none; and it
// serves lookups after the first scan and starts empty at open.
#include "backend/chunk/chunk_version_cache.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_store.h"
#include "ec/crc32c.h"
#include "tests/chunk/chunk_store_files.h"
#include "tests/chunk/chunk_store_test_util.h"

namespace stripefs {
namespace {

using testing::Payload;
using testing::PutRawIndexValue;
using testing::TempDir;
using testing::WriteLegacyStore;

constexpr uint32_t kLen = 16 * 4096;

// A bound of a few entries (one shard): nearly every fill evicts.
constexpr uint64_t kTinyCache = 2048;

struct CacheParam {
  const char* name;
  uint64_t bytes;
};

class ChunkVersionCacheTest : public ::testing::TestWithParam<CacheParam> {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    o.compact_bytes_per_sec = 0;  // the test compacts explicitly
    o.punch_holes = false;        // so that it has dead bytes to move
    o.version_cache_bytes = GetParam().bytes;
    auto s = ChunkStore::Open(path_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  std::string StorePath() const { return path_; }

  // The cache agrees with the index, and the store holds exactly model_.
  void Check(const std::string& step) {
    Status vs = store_->VerifyVersionCache();
    ASSERT_TRUE(vs.ok()) << step << ": " << vs.ToString();
    std::vector<ChunkInfo> listed;
    ChunkInfo after;
    for (;;) {
      auto page = store_->ListChunks(after, 7);
      ASSERT_TRUE(page.ok()) << step << ": " << page.status().ToString();
      if (page->empty()) break;
      listed.insert(listed.end(), page->begin(), page->end());
      after = page->back();
    }
    ASSERT_EQ(listed.size(), model_.size()) << step;
    size_t i = 0;
    for (const auto& [key, bytes] : model_) {
      EXPECT_EQ(listed[i].id, key.first) << step << " #" << i;
      EXPECT_EQ(listed[i].version, key.second) << step << " #" << i;
      EXPECT_EQ(listed[i].length, bytes.size()) << step << " #" << i;
      auto got = store_->ReadChunk(key.first, key.second, 0,
                                   static_cast<uint32_t>(bytes.size()));
      ASSERT_TRUE(got.ok())
          << step << ": " << DescribeChunk(key.first, key.second) << " "
          << got.status().ToString();
      EXPECT_TRUE(*got == bytes)
          << step << ": bytes of " << DescribeChunk(key.first, key.second);
      ++i;
    }
  }

  void Write(const ChunkId& id, uint64_t version, std::vector<uint8_t> data) {
    ASSERT_TRUE(store_->WriteChunk(id, version, data).ok());
    model_[{id, version}] = std::move(data);
  }
  void Patch(const ChunkId& id, uint64_t from, uint64_t to, uint32_t offset,
             const std::vector<uint8_t>& bytes) {
    Status st = store_->PatchChunk(id, from, to, kLen, offset, bytes);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<uint8_t> v = model_.at({id, from});
    std::copy(bytes.begin(), bytes.end(), v.begin() + offset);
    model_[{id, to}] = std::move(v);
  }
  void EraseModel(const ChunkId& id, uint64_t keep) {
    std::erase_if(model_, [&](const auto& e) {
      return e.first.first == id && e.first.second != keep;
    });
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/store";
  std::unique_ptr<ChunkStore> store_;
  std::map<std::pair<ChunkId, uint64_t>, std::vector<uint8_t>> model_;
};

INSTANTIATE_TEST_SUITE_P(
    Bound, ChunkVersionCacheTest,
    ::testing::Values(CacheParam{"Default",
                                 ChunkStoreOptions{}.version_cache_bytes},
                      CacheParam{"Tiny", kTinyCache}, CacheParam{"Off", 0}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_P(ChunkVersionCacheTest, VersionCacheStaysExactThroughEveryPath) {
  const ChunkId a{1, 0, 0}, b{1, 0, 1}, c{1, 1, 0}, d{2, 0, 0}, e{2, 0, 1};
  // Writes (each a scan or a hit of the versions).
  Write(a, 1, Payload(kLen, 1));
  Write(b, 1, Payload(kLen, 2));
  Write(c, 1, Payload(kLen, 3));
  Check("writes");
  // A patch of one block (shares the rest), then one of most of the chunk
  // (the read+write default).
  Patch(a, 1, 2, 4096, Payload(4096, 4));
  Check("patch in place");
  Patch(a, 2, 3, 0, Payload(kLen - 4096, 5));
  Check("whole patch");
  // A shared clone, then a prefix clone (copied).
  ASSERT_TRUE(store_->CloneChunk(b, 1, 2, kLen).ok());
  model_[{b, 2}] = model_.at({b, 1});
  Check("clone");
  ASSERT_TRUE(store_->CloneChunk(b, 2, 3, 4096).ok());
  model_[{b, 3}] = std::vector<uint8_t>(model_.at({b, 2}).begin(),
                                        model_.at({b, 2}).begin() + 4096);
  Check("prefix clone");
  // Two ranges in one patch.
  {
    const std::vector<PatchRange> ranges = {{4096, 4096}, {3 * 4096, 4096}};
    const auto two = Payload(2 * 4096, 6);
    ASSERT_TRUE(store_->PatchChunkRanges(c, 1, 2, kLen, ranges, two).ok());
    std::vector<uint8_t> v = model_.at({c, 1});
    std::copy(two.begin(), two.begin() + 4096, v.begin() + 4096);
    std::copy(two.begin() + 4096, two.end(), v.begin() + 3 * 4096);
    model_[{c, 2}] = std::move(v);
  }
  Check("multi-range patch");
  // A repair rewrite of an existing version (same length).
  Write(a, 1, Payload(kLen, 7));
  Check("rewrite");
  // Deletes: one version, all but one, a batch (with an absent version).
  ASSERT_TRUE(store_->DeleteChunkVersion(a, 2).ok());
  model_.erase({a, 2});
  Check("delete version");
  ASSERT_TRUE(store_->DeleteChunk(b, 2).ok());
  EraseModel(b, 2);
  Check("delete all but one");
  {
    const std::vector<ChunkVersion> doomed = {{a, 1}, {c, 1}, {b, 99}};
    ASSERT_TRUE(store_->DeleteChunkVersions(doomed).ok());
    model_.erase({a, 1});
    model_.erase({c, 1});
  }
  Check("batch delete");
  // A batch: patches, a clone, a write, and a chunk id named twice (the
  // one-op path).
  {
    const auto block = Payload(4096, 8), fresh = Payload(kLen, 9),
               again = Payload(kLen, 10);
    std::vector<ChunkWriteOp> ops(5);
    ops[0] = {ChunkWriteOp::Kind::kPatch, a, 3, 4, kLen, 8192, block};
    ops[1] = {ChunkWriteOp::Kind::kClone, b, 2, 4, kLen, 0, {}};
    ops[2] = {ChunkWriteOp::Kind::kWrite, d, 0, 1, 0, 0, fresh};
    ops[3] = {ChunkWriteOp::Kind::kPatch, c, 2, 3, kLen, 0, block};
    ops[4] = {ChunkWriteOp::Kind::kWrite, c, 0, 5, 0, 0, again};
    const std::vector<Status> got = store_->ApplyChunkOps(ops);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << i << " " << got[i].ToString();
    }
    std::vector<uint8_t> a4 = model_.at({a, 3});
    std::copy(block.begin(), block.end(), a4.begin() + 8192);
    model_[{a, 4}] = std::move(a4);
    model_[{b, 4}] = model_.at({b, 2});
    model_[{d, 1}] = fresh;
    std::vector<uint8_t> c3 = model_.at({c, 2});
    std::copy(block.begin(), block.end(), c3.begin());
    model_[{c, 3}] = std::move(c3);
    model_[{c, 5}] = again;
  }
  Check("batch");
  // Compaction rewrites every version with a piece in a sealed segment.
  auto rep = store_->Compact(true);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_GT(rep->chunks_moved, 0u);
  Check("compaction");
  ASSERT_TRUE(store_->Sweep().ok());
  Check("sweep");
  // Reopen: nothing cached; the paths fill it again.
  Reopen();
  EXPECT_EQ(store_->Counters().version_cache_entries, 0u);
  Check("reopen");
  Patch(a, 4, 5, 0, Payload(4096, 11));
  ASSERT_TRUE(store_->DeleteChunk(a, 5).ok());
  EraseModel(a, 5);
  Check("after reopen");

  // Recovery at open: the segment of e's version 1 goes missing; open drops
  // its entry (an index write outside a commit) after scanning e.
  Reopen();  // seals the segment: e v1 gets one of its own
  Write(e, 1, Payload(kLen, 12));
  const std::string lost = store_->Locate(e, 1)->path;
  Reopen();
  Write(e, 2, Payload(kLen, 13));
  ASSERT_TRUE(store_->DeleteChunkVersion(e, 7).ok());  // caches e
  ASSERT_NE(store_->Locate(e, 2)->path, lost);
  store_.reset();
  ASSERT_EQ(::unlink(lost.c_str()), 0);
  Reopen();
  model_.erase({e, 1});
  EXPECT_EQ(store_->Counters().missing_chunks, 1u);
  Check("missing segment at open");
  ASSERT_TRUE(store_->DeleteChunkVersion(e, 7).ok());
  Write(e, 3, Payload(kLen, 14));
  Check("after the drop");

  // A value that does not decode: its id is never cached, and deletes
  // still remove it.
  store_.reset();
  PutRawIndexValue(StorePath(), d, 7, "\x01short");
  ASSERT_FALSE(HasFatalFailure());
  Reopen();
  Write(d, 8, Payload(kLen, 15));
  Check("malformed neighbour");
  ASSERT_TRUE(store_->DeleteChunk(d, 8).ok());
  EraseModel(d, 8);
  EXPECT_EQ(store_->ReadChunk(d, 7, 0, 1).status().code(), ENOENT);
  Write(d, 9, Payload(kLen, 16));
  Check("malformed deleted");

  // A legacy store (one file per version): reads and Sweep drop the entry
  // of a version whose file is gone (index writes outside a commit), after
  // the id was cached.
  store_.reset();
  model_.clear();
  path_ = dir_.path() + "/legacy";
  const ChunkId g{4, 1, 0}, h{4, 2, 0};
  WriteLegacyStore(path_, {{g, kLen}, {h, kLen}});
  Reopen();
  Write(g, 2, Payload(kLen, 17));
  Write(h, 2, Payload(kLen, 18));
  model_[{g, 1}] = Payload(kLen, g.stripe);
  model_[{h, 1}] = Payload(kLen, h.stripe);
  Check("legacy");
  ASSERT_FALSE(store_->Locate(g, 1)->in_segment);
  ASSERT_EQ(::unlink(store_->Locate(g, 1)->path.c_str()), 0);
  EXPECT_EQ(store_->ReadChunk(g, 1, 0, 1).status().code(), ENOENT);
  model_.erase({g, 1});
  Check("read drops a missing legacy version");
  ASSERT_EQ(::unlink(store_->Locate(h, 1)->path.c_str()), 0);
  auto swept = store_->Sweep();
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept->missing_dropped, 1u);
  model_.erase({h, 1});
  Check("sweep drops a missing legacy version");
  Write(g, 3, Payload(kLen, 19));
  ASSERT_TRUE(store_->DeleteChunk(h, 3).ok());
  model_.erase({h, 2});
  Check("after the drops");

  const ChunkStoreCounters n = store_->Counters();
  if (GetParam().bytes == 0) {
    EXPECT_EQ(n.version_cache_hits + n.version_cache_misses +
                  n.version_cache_entries + n.version_cache_bytes,
              0u);
  } else {
    EXPECT_GT(n.version_cache_misses, 0u);
    EXPECT_LE(n.version_cache_bytes, GetParam().bytes);
  }
}

TEST_P(ChunkVersionCacheTest, VersionCacheHitsAfterTheFirstScanAndStartsEmpty) {
  const ChunkId a{3, 0, 0};
  const bool on = GetParam().bytes > 0;
  ChunkStoreCounters c = store_->Counters();
  EXPECT_EQ(c.version_cache_hits, 0u);
  EXPECT_EQ(c.version_cache_misses, 0u);
  EXPECT_EQ(c.version_cache_entries, 0u);
  EXPECT_EQ(c.version_cache_bytes, 0u);
  Write(a, 1, Payload(kLen, 1));  // scans once: a miss, filled
  c = store_->Counters();
  EXPECT_EQ(c.version_cache_misses, on ? 1u : 0u);
  EXPECT_EQ(c.version_cache_entries, on ? 1u : 0u);
  const uint64_t hits_after_write = c.version_cache_hits;
  Patch(a, 1, 2, 0, Payload(4096, 2));  // served from the cache
  ASSERT_TRUE(store_->DeleteChunkVersion(a, 1).ok());
  model_.erase({a, 1});
  c = store_->Counters();
  EXPECT_EQ(c.version_cache_misses, on ? 1u : 0u);
  if (on) {
    EXPECT_GT(c.version_cache_hits, hits_after_write);
    EXPECT_GT(c.version_cache_bytes, 0u);
  } else {
    EXPECT_EQ(c.version_cache_hits, 0u);
  }
  Check("hits");
  // Other ids (in a tiny cache's only shard) evict a's entry.
  for (uint32_t i = 1; i <= 8; ++i) {
    const ChunkId other{3, 0, i};
    Write(other, 1, Payload(kLen, 3 + i));
    Write(other, 2, Payload(kLen, 20 + i));
  }
  if (GetParam().bytes == kTinyCache) {
    EXPECT_GT(store_->Counters().version_cache_evictions, 0u);
  } else {
    EXPECT_EQ(store_->Counters().version_cache_evictions, 0u);
  }
  Check("evicted");

  Reopen();
  c = store_->Counters();
  EXPECT_EQ(c.version_cache_hits, 0u);
  EXPECT_EQ(c.version_cache_misses, 0u);
  EXPECT_EQ(c.version_cache_entries, 0u);
  EXPECT_EQ(c.version_cache_bytes, 0u);
  Patch(a, 2, 3, 0, Payload(4096, 5));  // a miss again
  EXPECT_EQ(store_->Counters().version_cache_misses, on ? 1u : 0u);
  Check("after reopen");
}

// A read fills the cache as a write's scan does (a reopened store starts
// empty, and a read-only client would otherwise look every block up in
// RocksDB), and what it filled serves the next patch.
TEST_P(ChunkVersionCacheTest, ReadsFillTheCacheForTheNextLookup) {
  const ChunkId a{4, 0, 0};
  const bool on = GetParam().bytes > 0;
  Write(a, 1, Payload(kLen, 7));
  Write(a, 2, Payload(kLen, 8));
  Reopen();
  ASSERT_EQ(store_->Counters().version_cache_entries, 0u);
  auto got = store_->ReadChunk(a, 2, 4096, 8192);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(
      std::equal(got->begin(), got->end(), model_.at({a, 2}).begin() + 4096));
  ChunkStoreCounters c = store_->Counters();
  EXPECT_EQ(c.version_cache_entries, on ? 1u : 0u);
  ASSERT_TRUE(store_->VerifyVersionCache().ok());
  // Both versions are in the entry: a version the read did not ask for is
  // found too, and one that does not exist is absent.
  ASSERT_TRUE(store_->ReadChunk(a, 1, 0, kLen).ok());
  auto none = store_->ReadChunk(a, 9, 0, 4096);
  EXPECT_EQ(none.status().code(), ENOENT) << none.status().ToString();
  c = store_->Counters();
  EXPECT_EQ(c.version_cache_misses, on ? 1u : 0u);  // the first read's scan
  Patch(a, 2, 3, 0, Payload(4096, 9));              // no scan: the read's entry
  EXPECT_EQ(store_->Counters().version_cache_misses, c.version_cache_misses);
  Check("read, then patched");
}

// Writers of their own chunk ids and of shared ones (distinct versions),
// deleters, clones, batches, a compactor and a checker at once: the cache
// agrees with the index throughout and at the end, and every thread's own
// chunks hold what it wrote.
TEST_P(ChunkVersionCacheTest, VersionCacheStaysExactUnderConcurrency) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 30;
  constexpr uint32_t kSmall = 4 * 4096;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::map<std::pair<ChunkId, uint64_t>, std::vector<uint8_t>>> own(
      kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](const Status& st) {
        if (!st.ok()) {
          ++failures;
          ADD_FAILURE() << "thread " << t << ": " << st.ToString();
        }
      };
      const ChunkId mine{10, static_cast<uint64_t>(t), 0};
      for (int i = 1; i <= kRounds; ++i) {
        const uint64_t v = static_cast<uint64_t>(t) * 1000 + i;
        // Own chunk: write, patch to the next version, drop the older.
        auto data = Payload(kSmall, v);
        fail(store_->WriteChunk(mine, 2 * v, data));
        auto block = Payload(4096, v + 7);
        fail(store_->PatchChunk(mine, 2 * v, 2 * v + 1, kSmall, 4096, block));
        std::copy(block.begin(), block.end(), data.begin() + 4096);
        fail(store_->DeleteChunk(mine, 2 * v + 1));
        own[t].clear();
        own[t][{mine, 2 * v + 1}] = data;
        // Shared chunks (every thread's versions side by side).
        const ChunkId shared{11, static_cast<uint64_t>(i % 3), 0};
        fail(store_->WriteChunk(shared, v, Payload(kSmall, v + 1)));
        fail(store_->CloneChunk(shared, v, v + 500, kSmall));
        if (i % 2 == 0) {
          const std::vector<ChunkVersion> doomed = {{shared, v},
                                                    {shared, v + 500}};
          fail(store_->DeleteChunkVersions(doomed));
        } else {
          fail(store_->DeleteChunkVersion(shared, v));
        }
        // A batch over a shared id and an own one.
        const ChunkId batch_own{12, static_cast<uint64_t>(t), 0};
        const ChunkId batch_shared{13, static_cast<uint64_t>(i % 2), 0};
        const auto fresh = Payload(kSmall, v + 2);
        std::vector<ChunkWriteOp> ops(2);
        ops[0] = {ChunkWriteOp::Kind::kWrite, batch_own, 0, v, 0, 0, fresh};
        ops[1] = {ChunkWriteOp::Kind::kWrite, batch_shared, 0, v, 0, 0, fresh};
        for (const Status& st : store_->ApplyChunkOps(ops)) fail(st);
        fail(store_->DeleteChunk(batch_own, v));
        fail(store_->DeleteChunkVersion(batch_shared, v));
      }
    });
  }
  std::thread checker([&] {
    while (!done.load()) {
      Status st = store_->VerifyVersionCache();
      if (!st.ok()) {
        ++failures;
        ADD_FAILURE() << "concurrent check: " << st.ToString();
      }
      (void)store_->Compact(false);
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  checker.join();
  EXPECT_EQ(failures.load(), 0);
  Status vs = store_->VerifyVersionCache();
  EXPECT_TRUE(vs.ok()) << vs.ToString();
  for (int t = 0; t < kThreads; ++t) {
    for (const auto& [key, bytes] : own[t]) model_[key] = bytes;
  }
  // What is left of the shared and batch ids: the clones of odd rounds.
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 1; i <= kRounds; i += 2) {
      const uint64_t v = static_cast<uint64_t>(t) * 1000 + i;
      const ChunkId shared{11, static_cast<uint64_t>(i % 3), 0};
      model_[{shared, v + 500}] = Payload(kSmall, v + 1);
    }
    const uint64_t last = static_cast<uint64_t>(t) * 1000 + kRounds;
    model_[{ChunkId{12, static_cast<uint64_t>(t), 0}, last}] =
        Payload(kSmall, last + 2);
  }
  Check("after the threads");
}

// The cache on its own: bounded, LRU, generation-guarded fills.
TEST(ChunkVersionCache, FillsAreRefusedAfterAConcurrentChange) {
  ChunkVersionCache cache(uint64_t{1} << 20);
  const ChunkId id{1, 2, 3};
  ChunkVersions one = {{5, ChunkIndexValue{}}};
  one[0].second.length = 10;
  // A scan that began before a drop (or an update) must not install.
  uint64_t token = cache.Token(id);
  cache.Drop(id);
  cache.Fill(id, token, one);
  EXPECT_EQ(cache.Lookup(id), nullptr);
  token = cache.Token(id);
  const uint64_t nine = 9;
  cache.ApplyDelete(id, std::span<const uint64_t>(&nine, 1));
  cache.Fill(id, token, one);
  EXPECT_EQ(cache.Lookup(id), nullptr);
  token = cache.Token(id);
  cache.Fill(id, token, one);
  auto hit = cache.Lookup(id);
  ASSERT_NE(hit, nullptr);
  ASSERT_EQ(hit->size(), 1u);
  EXPECT_EQ((*hit)[0].first, 5u);
  // Updates change a cached entry in place (sorted), deletes remove.
  ChunkIndexValue v;
  v.length = 20;
  const uint64_t three = 3, seven = 7, five = 5;
  cache.ApplyPut(id, std::span<const uint64_t>(&seven, 1), EncodeChunkValue(v));
  cache.ApplyPut(id, std::span<const uint64_t>(&three, 1), EncodeChunkValue(v));
  cache.ApplyDelete(id, std::span<const uint64_t>(&five, 1));
  hit = cache.Lookup(id);
  ASSERT_NE(hit, nullptr);
  ASSERT_EQ(hit->size(), 2u);
  EXPECT_EQ((*hit)[0].first, 3u);
  EXPECT_EQ((*hit)[1].first, 7u);
  EXPECT_EQ((*hit)[1].second.length, 20u);
  // A value that does not decode drops the entry.
  cache.ApplyPut(id, std::span<const uint64_t>(&three, 1), "\x01short");
  EXPECT_EQ(cache.Lookup(id), nullptr);
  cache.Clear();
  EXPECT_EQ(cache.Counters().entries, 0u);
  EXPECT_EQ(cache.Counters().bytes, 0u);
}

// An entry someone holds never changes under them (the change goes to a
// copy); one only the cache holds is changed in place (same object).
TEST(ChunkVersionCache, HandedOutEntriesNeverChange) {
  ChunkVersionCache cache(uint64_t{1} << 20);
  const ChunkId id{1, 2, 4};
  ChunkVersions one = {{5, ChunkIndexValue{}}};
  one[0].second.length = 10;
  cache.Fill(id, cache.Token(id), one);
  ChunkIndexValue v;
  v.length = 20;
  const uint64_t six = 6, seven = 7;
  std::shared_ptr<const ChunkVersions> held = cache.Lookup(id);
  ASSERT_NE(held, nullptr);
  const ChunkVersions* before = held.get();
  cache.ApplyPut(id, std::span<const uint64_t>(&six, 1), EncodeChunkValue(v));
  ASSERT_EQ(held->size(), 1u);  // unchanged for its holder
  EXPECT_EQ((*held)[0].first, 5u);
  auto now = cache.Lookup(id);
  ASSERT_EQ(now->size(), 2u);
  EXPECT_NE(now.get(), before);
  held.reset();
  const ChunkVersions* latest = now.get();
  now.reset();  // the cache's reference is the only one left
  cache.ApplyPut(id, std::span<const uint64_t>(&seven, 1), EncodeChunkValue(v));
  now = cache.Lookup(id);
  ASSERT_EQ(now->size(), 3u);
  EXPECT_EQ(now.get(), latest);  // changed in place
  EXPECT_EQ((*now)[2].first, 7u);
  EXPECT_EQ(cache.Counters().bytes, ChunkVersionCache::EntryBytes(*now));
}

TEST(ChunkVersionCache, EvictsTheLeastRecentlyUsedToStayBounded) {
  ChunkVersions vs = {{1, ChunkIndexValue{}}};
  const uint64_t each = ChunkVersionCache::EntryBytes(vs);
  ChunkVersionCache cache(each * 3);  // one shard, three entries
  ASSERT_EQ(cache.shards(), 1u);
  for (uint64_t i = 0; i < 3; ++i) {
    cache.Fill(ChunkId{i, 0, 0}, cache.Token(ChunkId{i, 0, 0}), vs);
  }
  EXPECT_EQ(cache.Counters().entries, 3u);
  EXPECT_NE(cache.Lookup(ChunkId{0, 0, 0}), nullptr);  // 0 is now the newest
  cache.Fill(ChunkId{3, 0, 0}, cache.Token(ChunkId{3, 0, 0}), vs);
  EXPECT_EQ(cache.Counters().evictions, 1u);
  EXPECT_EQ(cache.Counters().bytes, 3 * each);
  EXPECT_EQ(cache.Peek(ChunkId{1, 0, 0}), nullptr);  // the oldest went
  EXPECT_NE(cache.Peek(ChunkId{0, 0, 0}), nullptr);
  EXPECT_NE(cache.Peek(ChunkId{3, 0, 0}), nullptr);
  // An entry larger than the bound is not cached.
  ChunkVersions big(64, {1, ChunkIndexValue{}});
  cache.Fill(ChunkId{9, 0, 0}, cache.Token(ChunkId{9, 0, 0}), big);
  EXPECT_EQ(cache.Peek(ChunkId{9, 0, 0}), nullptr);
  EXPECT_EQ(ChunkVersionCache(uint64_t{32} << 20).shards(),
            ChunkVersionCache::kMaxShards);
}

}  // namespace
}  // namespace stripefs
