// The KvStore seam's contract on both engines (optimistic conflicts, range
// reads, DeleteRange, paging), and what only the etcd engine has: several
// MetaStores serving one volume at once, transactions split to fit etcd's
// limits, and a bounded failure when etcd is unreachable.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "backend/meta/etcd_kv.h"
#include "backend/meta/meta_schema.h"
#include "backend/meta/meta_store.h"
#include "backend/meta/rocks_kv.h"
#include "backend/rpc/meta_service_server.h"
#include "backend/rpc/remote_meta_service.h"
#include "backend/rpc/rpc_server.h"
#include "tests/meta/meta_test_util.h"

namespace stripefs {
namespace {

using testing::CheckInvariants;
using testing::Engine;
using testing::ReadAll;
using meta_schema::kMetaFormat;
using meta_schema::MetaKey;

std::string Key(int i) {
  char buf[16];
  snprintf(buf, sizeof(buf), "k%06d", i);
  return buf;
}

class KvStoreContract : public testing::MetaEngineFixture {
 protected:
  KvStoreContract() : MetaEngineFixture("kv-contract") {}
  void SetUp() override {
    MetaEngineFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (etcd()) {
      auto where = ParseEtcdLocation(location_);
      ASSERT_TRUE(where.ok()) << where.status().ToString();
      auto kv = ConnectEtcd(*where);
      ASSERT_TRUE(kv.ok()) << kv.status().ToString();
      kv_ = std::move(kv).value();
    } else {
      auto kv = RocksKv::Open(location_, /*create=*/true);
      ASSERT_TRUE(kv.ok()) << kv.status().ToString();
      kv_ = std::move(kv).value();
    }
  }
  // Writes `n` keys in transactions of `per_txn` writes.
  void Fill(int n, int per_txn) {
    for (int i = 0; i < n; i += per_txn) {
      auto t = kv_->Begin();
      for (int j = i; j < std::min(n, i + per_txn); ++j) t->Put(Key(j), "v");
      auto c = t->Commit();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
    }
  }
  std::unique_ptr<KvStore> kv_;
};

TEST_P(KvStoreContract, ConflictOnChangedPointRead) {
  Fill(1, 1);
  auto a = kv_->Begin();
  ASSERT_TRUE(a->Get(Key(0)).ok());
  a->Put("x", "from a");
  auto b = kv_->Begin();
  b->Put(Key(0), "changed");
  ASSERT_TRUE(b->Commit().ok());
  EXPECT_EQ(a->Commit().status().code(), kKvConflict);
  auto x = kv_->Get("x");
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(x->has_value()) << "a refused commit must write nothing";
}

TEST_P(KvStoreContract, ConflictOnKeyCreatedAfterAbsentRead) {
  auto a = kv_->Begin();
  auto v = a->Get("new");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
  a->Put("new", "a");
  auto b = kv_->Begin();
  b->Put("new", "b");
  ASSERT_TRUE(b->Commit().ok());
  EXPECT_EQ(a->Commit().status().code(), kKvConflict);
  EXPECT_EQ(kv_->Get("new")->value(), "b");
}

TEST_P(KvStoreContract, ConflictOnKeyAddedToReadRange) {
  Fill(3, 3);
  auto a = kv_->Begin();
  auto r = a->Scan(Key(0), Key(100), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 3u);
  a->Put("y", "a");
  auto b = kv_->Begin();
  b->Put(Key(50), "added");
  ASSERT_TRUE(b->Commit().ok());
  EXPECT_EQ(a->Commit().status().code(), kKvConflict);
}

TEST_P(KvStoreContract, UnrelatedChangeDoesNotConflictOnEtcd) {
  Fill(2, 2);
  auto a = kv_->Begin();
  ASSERT_TRUE(a->Get(Key(0)).ok());
  a->Put("z", "a");
  auto b = kv_->Begin();
  b->Put(Key(1), "other key");
  ASSERT_TRUE(b->Commit().ok());
  // etcd compares only what was read; RocksKv's sequence check is coarser
  // (any write conflicts), which MetaStore's serialisation never triggers.
  auto c = a->Commit();
  if (GetParam() == Engine::kEtcd) {
    EXPECT_TRUE(c.ok()) << c.status().ToString();
  } else {
    EXPECT_EQ(c.status().code(), kKvConflict);
  }
}

TEST_P(KvStoreContract, ScanOrderLimitAndPagingPastOneRequest) {
  Fill(2500, 100);  // more than the etcd engine's 1000 keys per request
  auto snap = kv_->Snapshot();
  auto all = snap->Scan(Key(0), Key(99999), 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2500u);
  for (int i = 0; i < 2500; ++i) ASSERT_EQ((*all)[i].key, Key(i));
  auto some = snap->Scan(Key(10), Key(99999), 1200);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->size(), 1200u);
  EXPECT_EQ(some->back().key, Key(1209));
  // A snapshot does not see later commits.
  auto t = kv_->Begin();
  t->Put(Key(5000), "later");
  ASSERT_TRUE(t->Commit().ok());
  auto again = snap->Scan(Key(0), Key(99999), 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 2500u);
}

TEST_P(KvStoreContract, DeleteRangeIsOneOperation) {
  Fill(300, 100);
  auto t = kv_->Begin();
  t->DeleteRange(Key(10), Key(290));
  EXPECT_EQ(t->ops(), 1u);
  ASSERT_TRUE(t->Commit().ok());
  auto left = kv_->Snapshot()->Scan(Key(0), Key(99999), 0);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->size(), 20u);
}

// Over the engine's bound a transaction is refused whole; without a bound
// (RocksDB) a big one commits.
TEST_P(KvStoreContract, OversizedTransactionIsRefusedWhole) {
  const size_t max_ops = kv_->limits().max_ops;
  if (max_ops == 0) {
    Fill(5000, 5000);
    EXPECT_EQ(kv_->Snapshot()->Scan(Key(0), Key(99999), 0)->size(), 5000u);
    return;
  }
  auto t = kv_->Begin();
  for (size_t i = 0; i <= max_ops; ++i) t->Put(Key(i), "v");
  EXPECT_EQ(t->Commit().status().code(), EFBIG);
  auto v = kv_->Get(Key(0));
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
}

INSTANTIATE_TEST_SUITE_P(RocksDb, KvStoreContract,
                         ::testing::Values(Engine::kRocksDb));
INSTANTIATE_TEST_SUITE_P(Etcd, KvStoreContract,
                         ::testing::Values(Engine::kEtcd));

// --- etcd only -------------------------------------------------------------

class EtcdMetaTest : public testing::MetaLocationFixture {
 protected:
  EtcdMetaTest() : MetaLocationFixture(Engine::kEtcd, "etcd-meta") {}
  void SetUp() override {
    MetaLocationFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto s = MetaStore::Create(location_, geo_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  Geometry geo_{4, 2, 4096};
  std::unique_ptr<MetaStore> store_;
};

// Two MetaStores (as two metads would) mutate the same directories at once;
// conflicts are re-run, so no entry is lost or doubled and link counts and
// statistics stay right.
TEST_F(EtcdMetaTest, TwoStoresOnOneVolumeKeepTheNamespaceConsistent) {
  auto second = MetaStore::Open(location_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  MetaStore* stores[] = {store_.get(), second->get()};
  const uint64_t a = store_->Mkdir(kRootInode, "a", 0755, 0, 0)->ino;
  const uint64_t b = store_->Mkdir(kRootInode, "b", 0755, 0, 0)->ino;
  const uint64_t dirs[] = {a, b};
  std::atomic<int> unexpected{0};
  std::atomic<int> succeeded{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      MetaStore& s = *stores[t % 2];
      std::mt19937 rng(77 + t);
      auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
      auto name = [&] { return "n" + std::to_string(pick(8)); };
      for (int i = 0; i < 60; ++i) {
        const uint64_t d = dirs[pick(2)];
        Status st;
        switch (pick(5)) {
          case 0:
          case 1:
            st = s.MkNode(d, name(), S_IFREG | 0644, 0, 0, 0).status();
            break;
          case 2:
            st = s.Unlink(d, name()).status();
            break;
          case 3:
            st = s.Rename(d, name(), dirs[pick(2)], name(), 0, nullptr);
            break;
          default: {
            auto src = s.Lookup(d, name());
            st = src.ok() ? s.Link(src->ino, dirs[pick(2)], name()).status()
                          : src.status();
          }
        }
        if (st.ok()) succeeded++;
        if (st.code() != 0 && st.code() != ENOENT && st.code() != EEXIST) {
          unexpected++;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(succeeded.load(), 40);
  CheckInvariants(*store_);
  CheckInvariants(**second);
  // Both see the same directory contents.
  for (uint64_t d : dirs) {
    std::set<std::string> x, y;
    for (auto& e : ReadAll(*store_, d)) x.insert(e.name);
    for (auto& e : ReadAll(**second, d)) y.insert(e.name);
    EXPECT_EQ(x, y);
  }
}

TEST_F(EtcdMetaTest, VersionRangesOfTwoStoresAreDisjoint) {
  auto second = MetaStore::Open(location_);
  ASSERT_TRUE(second.ok());
  std::set<uint64_t> seen;
  for (int i = 0; i < 20; ++i) {
    for (MetaStore* s : {store_.get(), second->get()}) {
      auto v = s->AllocateVersions(1000);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      for (uint64_t x = *v; x < *v + 1000; ++x) {
        ASSERT_TRUE(seen.insert(x).second) << "version " << x << " twice";
      }
    }
  }
}

// 1024 stripes in one CommitStripes exceed etcd's 128 operations: the
// commit is split into groups; truncating them away is one DeleteRange.
TEST_F(EtcdMetaTest, LargeStripeCommitAndTruncateFitEtcdLimits) {
  const uint64_t ino =
      store_->MkNode(kRootInode, "big", S_IFREG | 0644, 0, 0, 0)->ino;
  constexpr uint64_t kStripes = kMaxStripesPerCommit;
  auto first = store_->AllocateVersions(kStripes);
  ASSERT_TRUE(first.ok());
  std::vector<StripeCommit> commits;
  for (uint64_t i = 0; i < kStripes; ++i) {
    commits.push_back({StripeVersion{i, *first + i, 0, 4096}, 0});
  }
  std::vector<ObsoleteStripe> obsolete;
  Status st = store_->CommitStripes(ino, commits, kStripes * geo_.stripe_size(),
                                    &obsolete);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(obsolete.size(), kStripes);
  auto got = store_->GetStripes(ino, 0, kStripes + 10);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), kStripes);
  EXPECT_EQ(store_->GetAttr(ino)->size, kStripes * geo_.stripe_size());
  SetAttrRequest req;
  req.mask = kSetSize;
  req.size = 0;
  std::vector<ObsoleteStripe> dropped;
  ASSERT_TRUE(store_->SetAttr(ino, req, &dropped).ok());
  EXPECT_EQ(dropped.size(), kStripes);
  EXPECT_TRUE(store_->GetStripes(ino, 0, kStripes)->empty());
  CheckInvariants(*store_);
}

// Two metads serve one etcd volume; a client that knows both moves to the
// second when the first stops, and sees everything made through the first.
TEST_F(EtcdMetaTest, ClientMovesToTheOtherMetadWhenOneStops) {
  auto second = MetaStore::Open(location_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::array<uint8_t, rpc::kClusterKeySize> bytes;
  bytes.fill(3);
  std::shared_ptr<const rpc::ClusterKey> key =
      rpc::ClusterKey::FromBytes(bytes);
  rpc::MetaServiceServer handler_a(store_.get());
  rpc::MetaServiceServer handler_b(second->get());
  rpc::RpcServerOptions so;
  so.listen = "127.0.0.1:0";
  so.log_name = "metad-test";
  auto a = rpc::RpcServer::Start(so, key, &handler_a);
  auto b = rpc::RpcServer::Start(so, key, &handler_b);
  ASSERT_TRUE(a.ok() && b.ok());
  rpc::RemoteMetaService client((*a)->address() + "," + (*b)->address(), key);
  auto d = client.Mkdir(kRootInode, "d", 0755, 0, 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  (*a)->Stop();
  a->reset();
  auto seen = client.Lookup(kRootInode, "d");
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->ino, d->ino);
  auto f = client.MkNode(d->ino, "f", S_IFREG | 0644, 0, 0, 0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(store_->Lookup(d->ino, "f")->ino, f->ino);  // same volume
  (*b)->Stop();
}

// More entries than one etcd range request returns: readdir pages on.
TEST_F(EtcdMetaTest, ReadDirOfManyEntriesPagesThroughEtcd) {
  const uint64_t d = store_->Mkdir(kRootInode, "many", 0755, 0, 0)->ino;
  constexpr int kEntries = 1100;
  for (int i = 0; i < kEntries; ++i) {
    ASSERT_TRUE(
        store_->MkNode(d, "f" + std::to_string(i), S_IFREG | 0644, 0, 0, 0)
            .ok());
  }
  EXPECT_EQ(ReadAll(*store_, d, 4096).size(), kEntries + 2u);
  EXPECT_EQ(ReadAll(*store_, d, 300).size(), kEntries + 2u);
}

// No etcd answering: operations fail with ETIMEDOUT after the configured
// time instead of hanging.
TEST(EtcdMetaUnreachable, FailsCleanlyAfterTheTimeout) {
  // An engine left out of the build fails here (CI installs its packages).
  ASSERT_TRUE(EtcdEngineMissing().empty())
      << "etcd engine not built: " << EtcdEngineMissing();
  // Port 1 on loopback: nothing listens there.
  MetaStoreOptions o;
  o.etcd_insecure_loopback = true;
  auto s = MetaStore::Create("etcd://127.0.0.1:1/nowhere?timeout_ms=300",
                             Geometry{4, 2, 4096}, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ETIMEDOUT) << s.status().ToString();
  EXPECT_NE(s.status().message().find("quorum"), std::string::npos);
}

TEST(EtcdLocationParse, RejectsMalformedLocations) {
  for (const char* bad :
       {"etcd://", "etcd://h:1", "etcd:///p", "etcd://h/p", "etcd://h:1/",
        "etcd://h:1/p?x=1", "etcd://h:1/p?timeout_ms=0",
        "etcd://h:1/p?timeout_ms=12x", "file:///x", "etcds://h:1/p",
        "etcds://h:1/p?ca=a&cert=b", "etcd://h:1/p?ca=a&cert=b&key=c",
        "etcds://h:1/p?ca=&cert=b&key=c"}) {
    EXPECT_EQ(ParseEtcdLocation(bad).status().code(), EINVAL) << bad;
  }
  auto ok = ParseEtcdLocation("etcd://a:1,b:2/vol/x?timeout_ms=1500");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->endpoints, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(ok->prefix, "vol/x/");
  EXPECT_EQ(ok->timeout.count(), 1500);
  EXPECT_FALSE(ok->tls);
  const std::string text =
      "etcds://a:1/vol?ca=/c/ca.crt&cert=/c/u.crt&key=/c/u.key&timeout_ms=700";
  auto tls = ParseEtcdLocation(text);
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  ASSERT_TRUE(tls->tls);
  EXPECT_EQ(tls->tls->ca, "/c/ca.crt");
  EXPECT_EQ(tls->tls->cert, "/c/u.crt");
  EXPECT_EQ(tls->tls->key, "/c/u.key");
  EXPECT_EQ(tls->timeout.count(), 700);
  EXPECT_EQ(FormatEtcdLocation(*tls), text);
}

// A plaintext location is refused unless the caller allows it (the
// --etcd-insecure flags), and then only on loopback; the error names the fix.
TEST(EtcdLocationPolicy, PlaintextOnlyOnLoopbackAndOnlyWhenAllowed) {
  auto plain = ParseEtcdLocation("etcd://127.0.0.1:2379/v");
  ASSERT_TRUE(plain.ok());
  Status refused = CheckEtcdSecurity(*plain);
  EXPECT_EQ(refused.code(), EPERM);
  EXPECT_NE(refused.message().find("--etcd-insecure"), std::string::npos);
  EXPECT_NE(refused.message().find("etcds://"), std::string::npos);
  EXPECT_EQ(ConnectEtcd(*plain).status().code(), EPERM);
  EXPECT_EQ(MetaStore::Create("etcd://127.0.0.1:2379/v", Geometry{4, 2, 4096})
                .status()
                .code(),
            EPERM);
  for (const char* loop : {"etcd://127.0.0.1:1,127.0.0.2:2/v",
                           "etcd://localhost:1/v", "etcd://[::1]:1/v"}) {
    auto w = ParseEtcdLocation(loop);
    ASSERT_TRUE(w.ok()) << loop;
    w->insecure_loopback_ok = true;
    EXPECT_TRUE(CheckEtcdSecurity(*w).ok()) << loop;
  }
  for (const char* far :
       {"etcd://10.0.0.1:2379/v", "etcd://127.0.0.1:1,etcd.example:2379/v",
        "etcd://[2001:db8::1]:2379/v"}) {
    auto w = ParseEtcdLocation(far);
    ASSERT_TRUE(w.ok()) << far;
    w->insecure_loopback_ok = true;
    Status st = CheckEtcdSecurity(*w);
    EXPECT_EQ(st.code(), EPERM) << far;
    EXPECT_NE(st.message().find("loopback only"), std::string::npos) << far;
  }
}

// etcd with TLS, client-certificate auth and a user per volume (the shared
// fixture runs so): only a volume's own user reaches its prefix.
class EtcdSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::SharedEtcd();
    if (!etcd.ok() && testing::IsEtcdSkip(etcd.status()))
      GTEST_SKIP() << "etcd engine tests skipped: " << etcd.status().ToString();
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = *etcd;
    for (std::string* loc : {&mine_, &theirs_}) {
      auto l = etcd_->NewLocation("secure");
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      *loc = *l;
    }
    auto store = MetaStore::Create(mine_, Geometry{4, 2, 4096});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Mkdir(kRootInode, "secret", 0700, 0, 0).ok());
  }
  // `where` with its TLS files replaced by certificate `name`'s.
  EtcdLocation As(const std::string& location, const std::string& name) {
    auto w = ParseEtcdLocation(location);
    EXPECT_TRUE(w.ok());
    w->tls = etcd_->pki().FilesFor(name);
    w->timeout = std::chrono::milliseconds(1500);
    return *w;
  }
  // The other volume's certificate name (its prefix without the '/').
  std::string TheirUser() {
    auto w = ParseEtcdLocation(theirs_);
    return w->prefix.substr(0, w->prefix.size() - 1);
  }

  testing::EtcdProcess* etcd_ = nullptr;
  std::string mine_, theirs_;
};

TEST_F(EtcdSecurityTest, OwnUserReadsAndWritesThroughTheProduct) {
  auto store = MetaStore::Open(mine_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto e = (*store)->Lookup(kRootInode, "secret");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*store)->Mkdir(kRootInode, "more", 0755, 0, 0).ok());
}

TEST_F(EtcdSecurityTest, PlaintextClientReachesNothing) {
  auto w = ParseEtcdLocation(mine_);
  ASSERT_TRUE(w.ok());
  w->tls.reset();
  w->insecure_loopback_ok = true;  // allowed by us; etcd speaks TLS only
  w->timeout = std::chrono::milliseconds(1500);
  auto kv = ConnectEtcd(*w);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  auto got = (*kv)->Get(MetaKey(kMetaFormat));
  EXPECT_FALSE(got.ok());
  auto t = (*kv)->Begin();
  t->Put("intruder", "x");
  EXPECT_FALSE(t->Commit().ok());
}

TEST_F(EtcdSecurityTest, CertificateWithoutAUserIsRefused) {
  ASSERT_TRUE(etcd_->pki().Issue("nobody", "nobody").ok());
  auto kv = ConnectEtcd(As(mine_, "nobody"));
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  auto got = (*kv)->Get(MetaKey(kMetaFormat));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EACCES) << got.status().ToString();
}

TEST_F(EtcdSecurityTest, AnotherVolumesUserCanNeitherReadNorWrite) {
  // Their certificate is valid: it opens their own volume.
  ASSERT_TRUE(MetaStore::Create(theirs_, Geometry{4, 2, 4096}).status().ok());
  auto kv = ConnectEtcd(As(mine_, TheirUser()));
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  auto got = (*kv)->Get(MetaKey(kMetaFormat));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), EACCES) << got.status().ToString();
  auto scan = (*kv)->Snapshot()->Scan("", "\xff", 0);
  EXPECT_EQ(scan.status().code(), EACCES) << scan.status().ToString();
  auto t = (*kv)->Begin();
  t->Put(MetaKey(kMetaFormat), "overwritten");
  EXPECT_EQ(t->Commit().status().code(), EACCES);
  // Nothing changed: the owner still opens its volume.
  auto store = MetaStore::Open(mine_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Lookup(kRootInode, "secret").ok());
}

TEST_F(EtcdSecurityTest, ReadableClientKeyIsRefusedNamingChmod) {
  EtcdLocation w = As(mine_, TheirUser());
  const std::string copy = ::testing::TempDir() + "/etcd-open.key";
  std::filesystem::copy_file(w.tls->key, copy,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::chmod(copy.c_str(), 0644), 0);
  w.tls->key = copy;
  auto kv = ConnectEtcd(w);
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), EPERM);
  EXPECT_NE(kv.status().message().find("chmod 600 " + copy), std::string::npos)
      << kv.status().ToString();
  std::filesystem::remove(copy);
}

}  // namespace
}  // namespace stripefs
