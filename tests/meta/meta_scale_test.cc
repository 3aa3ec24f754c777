// Metadata at scale (issue 16), on both engines: inode numbers leased in
// blocks, per-MetaStore statistics shards, a store written by release 1,
// a directory of 100k entries and a 10 GiB sparse file; on etcd, two
// MetaStores creating at once without a hot record.
//
// The big-namespace tests run a CI size unless STRIPEFS_SOAK=1 (ctest label
// soak): RocksDB always 100k entries, etcd 20k in CI (each create is a Raft
// round trip with an fsync on this loaded machine) and 100k under soak. Each
// prints its size and seconds.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "backend/meta/meta_schema.h"
#include "backend/meta/meta_store.h"
#include "backend/meta/rocks_kv.h"
#include "tests/meta/meta_test_util.h"

namespace stripefs {
namespace {

using testing::CheckInvariants;
using testing::Engine;
using testing::ReadAll;
using testing::TempDir;

bool Soak() {
  const char* v = std::getenv("STRIPEFS_SOAK");
  return v != nullptr && std::string(v) == "1";
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

class MetaScaleTest : public testing::MetaEngineFixture {
 protected:
  MetaScaleTest() : MetaEngineFixture("meta-scale") {}
  void SetUp() override {
    MetaEngineFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    options_.sync = false;  // durability is not what these tests check
    options_.inode_batch = 64;
    auto s = MetaStore::Create(location_, geo_, options_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  Geometry geo_{4, 2, 4096};
  MetaStoreOptions options_;
  std::unique_ptr<MetaStore> store_;
};

// Inode numbers come from leased blocks: distinct, and a reopened store
// (as after a crash) leases a new block past every number handed out,
// leaking at most the rest of one block.
TEST_P(MetaScaleTest, InodeBlocksAreNeverReusedAcrossReopen) {
  std::set<uint64_t> seen{kRootInode};
  uint64_t max_before = 0;
  for (int i = 0; i < 100; ++i) {  // more than one block of 64
    auto a = store_->MkNode(kRootInode, "a" + std::to_string(i), S_IFREG | 0644,
                            0, 0, 0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(seen.insert(a->ino).second) << "inode " << a->ino << " twice";
    max_before = std::max(max_before, a->ino);
  }
  store_.reset();
  auto s = MetaStore::Open(location_, options_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(s).value();
  auto b = store_->Mkdir(kRootInode, "after", 0755, 0, 0);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->ino, max_before);
  EXPECT_LE(b->ino, max_before + options_.inode_batch)
      << "more than one block leaked by a close";
  EXPECT_EQ(store_->StatFs()->inodes, 102u);
  CheckInvariants(*store_);
}

// 100k entries in one directory (20k for etcd in CI): a full readdir with
// cookies returns each exactly once, in small and large pages. On etcd,
// every transaction was checked against etcd's limits before it was sent
// (EtcdKv refuses larger ones with EFBIG), so success is the proof.
TEST_P(MetaScaleTest, BigDirectoryReadsEveryEntryOnce) {
  const int n = !etcd() || Soak() ? 100000 : 20000;
  if (n < 100000) {
    std::printf(
        "*** %s: %d entries (the CI size on etcd); the full 100000 run is "
        "`STRIPEFS_SOAK=1` / ctest label soak ***\n",
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), n);
  }
  const uint64_t d = store_->Mkdir(kRootInode, "big", 0755, 0, 0)->ino;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = store_->MkNode(d, "entry-" + std::to_string(i), S_IFREG | 0644, 0,
                            0, 0);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
  }
  const double create_s = SecondsSince(t0);
  t0 = std::chrono::steady_clock::now();
  for (uint32_t page : {1000u, 100000u}) {
    std::vector<DirEntry> all = ReadAll(*store_, d, page);
    ASSERT_EQ(all.size(), n + 2u) << "page " << page;
    std::set<std::string> names;
    for (const DirEntry& e : all) names.insert(e.name);
    EXPECT_EQ(names.size(), n + 2u) << "an entry came twice";
    for (int i = 0; i < n; i += 997) {
      EXPECT_TRUE(names.count("entry-" + std::to_string(i))) << i;
    }
  }
  const double readdir_s = SecondsSince(t0);
  EXPECT_EQ(store_->GetAttr(d)->nlink, 2u);
  EXPECT_EQ(store_->StatFs()->inodes, n + 2u);
  std::printf("%s: %d entries: create %.1f s, 2 full readdirs %.1f s\n",
              etcd() ? "etcd" : "rocksdb", n, create_s, readdir_s);
  ::testing::Test::RecordProperty("seconds_create", std::to_string(create_s));
}

// A 10 GiB sparse file: a few stripes far apart, then a truncate. The
// stripe map holds only the written stripes; every other stripe is a hole
// (GetStripes returns nothing for it: clients read zeros).
TEST_P(MetaScaleTest, TenGibSparseFileStripeMap) {
  const uint64_t ss = geo_.stripe_size();
  const uint64_t size = 10ull << 30;
  const uint64_t stripes = size / ss;  // 655360 at 16 KiB stripes
  const uint64_t ino =
      store_->MkNode(kRootInode, "sparse", S_IFREG | 0644, 0, 0, 0)->ino;
  const std::vector<uint64_t> written = {0, 1, 4096, stripes / 2, stripes - 1};
  auto first = store_->AllocateVersions(written.size());
  ASSERT_TRUE(first.ok());
  std::vector<StripeCommit> commits;
  for (size_t i = 0; i < written.size(); ++i) {
    commits.push_back({StripeVersion{written[i], *first + i, 0, 4096}, 0});
  }
  std::vector<ObsoleteStripe> obsolete;
  ASSERT_TRUE(store_->CommitStripes(ino, commits, size, &obsolete).ok());
  EXPECT_EQ(store_->GetAttr(ino)->size, size);
  EXPECT_EQ(store_->StatFs()->bytes_used, size);

  auto t0 = std::chrono::steady_clock::now();
  auto all = store_->GetStripes(ino, 0, stripes);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), written.size());
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ((*all)[i].stripe, written[i]);
  }
  // Holes between: nothing recorded, so reads return zeros.
  EXPECT_TRUE(store_->GetStripes(ino, 2, 4094)->empty());
  EXPECT_TRUE(store_->GetStripes(ino, stripes / 2 + 1, 1000)->empty());

  // Truncate to 5 GiB + one byte: stripes past the new end go (one
  // DeleteRange on etcd), the one holding the last byte stays if written.
  SetAttrRequest req;
  req.mask = kSetSize;
  req.size = size / 2 + 1;
  std::vector<ObsoleteStripe> dropped;
  ASSERT_TRUE(store_->SetAttr(ino, req, &dropped).ok());
  EXPECT_EQ(dropped.size(), 1u);  // stripes - 1
  auto after = store_->GetStripes(ino, 0, stripes);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 4u);
  EXPECT_EQ(after->back().stripe, stripes / 2);
  // Growing again makes a hole where the dropped stripe was.
  req.size = size;
  ASSERT_TRUE(store_->SetAttr(ino, req, &dropped).ok());
  EXPECT_TRUE(store_->GetStripes(ino, stripes - 1, 1)->empty());
  EXPECT_EQ(store_->StatFs()->bytes_used, size);
  std::printf("%s: 10 GiB sparse file, stripe map scans %.3f s\n",
              etcd() ? "etcd" : "rocksdb", SecondsSince(t0));
  CheckInvariants(*store_);
}

INSTANTIATE_TEST_SUITE_P(RocksDb, MetaScaleTest,
                         ::testing::Values(Engine::kRocksDb));
INSTANTIATE_TEST_SUITE_P(Etcd, MetaScaleTest, ::testing::Values(Engine::kEtcd));

// A store as release 1 wrote it (one exact M next_inode counter, one M
// stats record, no shards) opens and goes on: numbers past the counter,
// statistics continued.
TEST(MetaStoreRelease1, OpensAndContinuesTheSingleCounters) {
  using namespace meta_schema;  // NOLINT(google-build-using-namespace)
  TempDir tmp;
  const std::string dir = tmp.sub("v1");
  std::filesystem::create_directories(dir);
  {
    auto kv = RocksKv::Open(dir, /*create=*/true);
    ASSERT_TRUE(kv.ok()) << kv.status().ToString();
    auto t = (*kv)->Begin();
    InodeRecord root;
    root.attr.ino = kRootInode;
    root.attr.mode = S_IFDIR | 0755;
    root.attr.nlink = 2;
    root.attr.generation = 1;
    root.parent = kRootInode;
    root.next_seq = kFirstEntrySeq + 1;
    InodeRecord file;
    file.attr.ino = 2;
    file.attr.mode = S_IFREG | 0644;
    file.attr.nlink = 1;
    file.attr.size = 123;
    file.attr.generation = 1;
    t->Put(InodeKey(kRootInode), EncodeInode(root));
    t->Put(InodeKey(2), EncodeInode(file));
    t->Put(DentryKey(kRootInode, "old"),
           EncodeDentry(DentryValue{2, S_IFREG, kFirstEntrySeq}));
    t->Put(CookieKey(kRootInode, kFirstEntrySeq), "old");
    t->Put(MetaKey(kMetaGeometry), EncodeGeometry(Geometry{4, 2, 4096}));
    t->Put(MetaKey(kMetaNextInode), EncodeU64(3));
    t->Put(MetaKey(kMetaVersionLimit), EncodeU64(1));
    t->Put(MetaKey(kMetaStats), EncodeStats(FsStats{2, 123}));
    t->Put(MetaKey(kMetaCluster), EncodeClusterMap(ClusterMap{}));
    t->Put(MetaKey(kMetaFormat), EncodeU32(1));
    ASSERT_TRUE(t->Commit().ok());
  }
  auto s = MetaStore::Open(dir);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Lookup(kRootInode, "old")->ino, 2u);
  auto n = (*s)->MkNode(kRootInode, "new", S_IFREG | 0644, 0, 0, 0);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->ino, 3u);  // the first number of the first leased block
  auto st = (*s)->StatFs();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->inodes, 3u);
  EXPECT_EQ(st->bytes_used, 123u);
  CheckInvariants(**s);
}

// --- etcd: several MetaStores on one volume -------------------------------

class EtcdMetaScale : public testing::MetaLocationFixture {
 protected:
  EtcdMetaScale() : MetaLocationFixture(Engine::kEtcd, "etcd-scale") {}
  void SetUp() override {
    MetaLocationFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    options_.inode_batch = 32;  // several leases per store in each test
    for (int i = 0; i < 2; ++i) {
      auto s = i == 0 ? MetaStore::Create(location_, geo_, options_)
                      : MetaStore::Open(location_, options_);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      stores_[i] = std::move(s).value();
    }
  }
  // Each store creates `n` files in dirs[store] from its own thread, at once.
  // Returns every inode number created; failures are test failures.
  std::vector<uint64_t> CreateConcurrently(const uint64_t dirs[2], int n) {
    std::vector<uint64_t> inos[2];
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        ready++;
        while (ready.load() < 2) std::this_thread::yield();
        for (int i = 0; i < n; ++i) {
          auto r = stores_[t]->MkNode(
              dirs[t], "s" + std::to_string(t) + "-" + std::to_string(i),
              S_IFREG | 0644, 0, 0, 0);
          if (!r.ok()) {
            ADD_FAILURE() << "store " << t << ": " << r.status().ToString();
            return;
          }
          inos[t].push_back(r->ino);
        }
      });
    }
    for (auto& th : threads) th.join();
    inos[0].insert(inos[0].end(), inos[1].begin(), inos[1].end());
    return inos[0];
  }
  // Mutations re-run after a conflict, on both stores (inode-block lease
  // re-runs are counted apart: two stores may lease at the same moment).
  uint64_t conflicts() const {
    return stores_[0]->commit_stats().conflicts +
           stores_[1]->commit_stats().conflicts;
  }

  Geometry geo_{4, 2, 4096};
  MetaStoreOptions options_;
  std::unique_ptr<MetaStore> stores_[2];
};

// Creates in different directories share no record any more (inode numbers
// from per-store blocks, statistics in per-store shards): not one conflict.
TEST_F(EtcdMetaScale, CreatesInSeparateDirectoriesNeverConflict) {
  const uint64_t dirs[2] = {
      stores_[0]->Mkdir(kRootInode, "a", 0755, 0, 0)->ino,
      stores_[1]->Mkdir(kRootInode, "b", 0755, 0, 0)->ino};
  const uint64_t before = conflicts();
  std::vector<uint64_t> inos = CreateConcurrently(dirs, 150);
  EXPECT_EQ(conflicts() - before, 0u)
      << "creates in separate directories conflicted";
  std::set<uint64_t> distinct(inos.begin(), inos.end());
  EXPECT_EQ(distinct.size(), 300u) << "duplicate inode numbers";
  CheckInvariants(*stores_[0]);
  CheckInvariants(*stores_[1]);
}

// Creates in one directory both rewrite that directory's inode (mtime,
// cookie sequence): they conflict and are re-run, never fail; no entry is
// lost or doubled, numbers are distinct, link counts and statistics right.
TEST_F(EtcdMetaScale, CreatesInOneDirectoryFromTwoStoresAllSucceed) {
  const uint64_t d = stores_[0]->Mkdir(kRootInode, "shared", 0755, 0, 0)->ino;
  const uint64_t dirs[2] = {d, d};
  std::vector<uint64_t> inos = CreateConcurrently(dirs, 150);
  std::set<uint64_t> distinct(inos.begin(), inos.end());
  EXPECT_EQ(distinct.size(), 300u) << "duplicate inode numbers";
  EXPECT_EQ(ReadAll(*stores_[1], d, 1000).size(), 302u);
  std::printf(
      "2 stores x 150 creates in one directory: %llu conflicts "
      "re-run\n",
      static_cast<unsigned long long>(conflicts()));
  CheckInvariants(*stores_[0]);
}

// A third MetaStore opening folds the others' statistics shards into the
// base while they write: the sum stays exact.
TEST_F(EtcdMetaScale, StatsShardsFoldWhileOthersWrite) {
  const uint64_t dirs[2] = {
      stores_[0]->Mkdir(kRootInode, "a", 0755, 0, 0)->ino,
      stores_[1]->Mkdir(kRootInode, "b", 0755, 0, 0)->ino};
  std::unique_ptr<MetaStore> third;
  std::thread opener([&] {
    for (int i = 0; i < 5; ++i) {
      auto s = MetaStore::Open(location_, options_);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      third = std::move(s).value();
    }
  });
  CreateConcurrently(dirs, 80);
  opener.join();
  ASSERT_TRUE(third);
  auto st = third->StatFs();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->inodes, 1u + 2u + 160u);
  CheckInvariants(*third);
}

}  // namespace
}  // namespace stripefs
