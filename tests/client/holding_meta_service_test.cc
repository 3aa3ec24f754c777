// HoldingMetaService over a real MetaStore behind a wrapper that plays a
// metad outage: calls fail with EHOSTDOWN before reaching the store, or
// reach it and then lose their reply (the ambiguous case). Backoffs are a
// few milliseconds; no test checks how long anything took.
#include "backend/client/holding_meta_service.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>

#include "backend/meta/meta_store.h"

namespace stripefs {
namespace {

// Forwards to `inner`; the next `fail_before` calls fail without reaching
// it, then the next `lose_reply` calls are applied but answer EHOSTDOWN.
class OutageMetaService final : public MetaService {
 public:
  explicit OutageMetaService(MetaService* inner) : inner_(inner) {}
  std::atomic<int> fail_before{0}, lose_reply{0}, calls{0};

#define STRIPEFS_FWD(Ret, Name, Params, Args)            \
  Ret Name Params override {                             \
    return Gate<Ret>([&] { return inner_->Name Args; }); \
  }
  STRIPEFS_FWD(Result<Geometry>, GetGeometry, (), ())
  STRIPEFS_FWD(Result<ClusterMap>, GetClusterMap, (), ())
  STRIPEFS_FWD(Status, UpsertServer, (const ServerInfo& i), (i))
  STRIPEFS_FWD(Status, SetServerState, (uint32_t id, ServerState s), (id, s))
  STRIPEFS_FWD(Result<InodeAttr>, Lookup, (uint64_t p, const std::string& n),
               (p, n))
  STRIPEFS_FWD(Result<InodeAttr>, GetAttr, (uint64_t i), (i))
  STRIPEFS_FWD(Result<InodeAttr>, SetAttr,
               (uint64_t i, const SetAttrRequest& r,
                std::vector<ObsoleteStripe>* o),
               (i, r, o))
  STRIPEFS_FWD(Result<InodeAttr>, MkNode,
               (uint64_t p, const std::string& n, uint32_t m, uint32_t u,
                uint32_t g, uint32_t r),
               (p, n, m, u, g, r))
  STRIPEFS_FWD(Result<InodeAttr>, Mkdir,
               (uint64_t p, const std::string& n, uint32_t m, uint32_t u,
                uint32_t g),
               (p, n, m, u, g))
  STRIPEFS_FWD(Result<InodeAttr>, Symlink,
               (uint64_t p, const std::string& n, const std::string& t,
                uint32_t u, uint32_t g),
               (p, n, t, u, g))
  STRIPEFS_FWD(Result<std::string>, ReadLink, (uint64_t i), (i))
  STRIPEFS_FWD(Result<InodeAttr>, Link,
               (uint64_t i, uint64_t p, const std::string& n), (i, p, n))
  STRIPEFS_FWD(Result<InodeAttr>, Unlink, (uint64_t p, const std::string& n),
               (p, n))
  STRIPEFS_FWD(Status, Rmdir, (uint64_t p, const std::string& n), (p, n))
  STRIPEFS_FWD(Status, Rename,
               (uint64_t p, const std::string& n, uint64_t np,
                const std::string& nn, uint32_t f, uint64_t* r),
               (p, n, np, nn, f, r))
  STRIPEFS_FWD(Result<std::vector<DirEntry>>, ReadDir,
               (uint64_t i, uint64_t c, uint32_t m), (i, c, m))
  STRIPEFS_FWD(Status, PurgeInode, (uint64_t i, std::vector<ObsoleteStripe>* o),
               (i, o))
  STRIPEFS_FWD(Result<std::vector<uint64_t>>, ListOrphans, (), ())
  STRIPEFS_FWD(Result<FsStats>, StatFs, (), ())
  STRIPEFS_FWD(Status, SetXattr,
               (uint64_t i, const std::string& n, const std::string& v,
                uint32_t f),
               (i, n, v, f))
  STRIPEFS_FWD(Result<std::string>, GetXattr,
               (uint64_t i, const std::string& n), (i, n))
  STRIPEFS_FWD(Result<std::vector<std::string>>, ListXattr, (uint64_t i), (i))
  STRIPEFS_FWD(Status, RemoveXattr, (uint64_t i, const std::string& n), (i, n))
  STRIPEFS_FWD(Result<uint64_t>, AllocateVersions, (uint32_t c), (c))
  STRIPEFS_FWD(Result<std::vector<StripeVersion>>, GetStripes,
               (uint64_t i, uint64_t f, uint64_t c), (i, f, c))
  STRIPEFS_FWD(Status, CommitStripe,
               (uint64_t i, const StripeVersion& sv, uint64_t e, uint64_t m,
                ObsoleteStripe* o),
               (i, sv, e, m, o))
  STRIPEFS_FWD(Status, CommitStripes,
               (uint64_t i, const std::vector<StripeCommit>& c, uint64_t m,
                std::vector<ObsoleteStripe>* o),
               (i, c, m, o))
  STRIPEFS_FWD(Status, SetStripeMissing,
               (uint64_t i, uint64_t s, uint64_t v, uint32_t m), (i, s, v, m))
  STRIPEFS_FWD(Result<std::vector<StripeRef>>, ListStripes,
               (uint64_t i, uint64_t s, uint32_t l), (i, s, l))
#undef STRIPEFS_FWD

 private:
  template <typename Ret, typename Call>
  Ret Gate(Call&& call) {
    calls.fetch_add(1);
    if (fail_before.load() > 0) {
      fail_before.fetch_sub(1);
      return Status(EHOSTDOWN, "metad at 127.0.0.1:1 is unreachable");
    }
    Ret r = call();
    if (lose_reply.load() > 0) {
      lose_reply.fetch_sub(1);
      return Status(ECONNRESET, "connection reset before the reply");
    }
    return r;
  }
  MetaService* const inner_;
};

class HoldingMetaServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-hold-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    MetaStoreOptions mo;
    mo.sync = false;
    auto store = MetaStore::Create(dir_ + "/meta", Geometry{4, 2, 4096}, mo);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto outage = std::make_unique<OutageMetaService>(store_.get());
    outage_ = outage.get();
    MetaHoldOptions o;
    o.hold = std::chrono::seconds(60);
    o.first_backoff = std::chrono::milliseconds(1);
    o.max_backoff = std::chrono::milliseconds(4);
    held_ = std::make_unique<HoldingMetaService>(std::move(outage), o);
  }
  void TearDown() override {
    held_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<MetaStore> store_;
  OutageMetaService* outage_ = nullptr;
  std::unique_ptr<HoldingMetaService> held_;
};

TEST_F(HoldingMetaServiceTest, OutageShorterThanTheHoldIsWaitedOut) {
  outage_->fail_before = 5;
  auto a = held_->GetAttr(kRootInode);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(outage_->calls.load(), 6);
  EXPECT_EQ(held_->held_calls(), 1u);
  EXPECT_EQ(held_->expired_calls(), 0u);
}

TEST_F(HoldingMetaServiceTest, OutageLongerThanTheHoldIsEioNotEhostdown) {
  MetaHoldOptions o;
  o.hold = std::chrono::milliseconds(20);
  o.first_backoff = std::chrono::milliseconds(1);
  o.max_backoff = std::chrono::milliseconds(2);
  auto outage = std::make_unique<OutageMetaService>(store_.get());
  outage->fail_before = 1 << 30;
  HoldingMetaService short_hold(std::move(outage), o);
  auto a = short_hold.GetAttr(kRootInode);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), EIO) << a.status().ToString();
  EXPECT_NE(a.status().message().find("--meta-hold-s"), std::string::npos);
  Status st = short_hold.Rmdir(kRootInode, "d");
  EXPECT_EQ(st.code(), EIO) << st.ToString();
  EXPECT_EQ(short_hold.expired_calls(), 2u);
}

TEST_F(HoldingMetaServiceTest, OtherErrorsReturnAtOnce) {
  auto a = held_->Lookup(kRootInode, "missing");
  EXPECT_EQ(a.status().code(), ENOENT);
  EXPECT_EQ(outage_->calls.load(), 1);
  EXPECT_EQ(held_->held_calls(), 0u);
}

TEST_F(HoldingMetaServiceTest, LostReplyOfACreateReturnsTheCreatedEntry) {
  outage_->lose_reply = 1;
  auto d = held_->Mkdir(kRootInode, "d", 040755, 7, 8);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto looked = store_->Lookup(kRootInode, "d");
  ASSERT_TRUE(looked.ok());
  EXPECT_EQ(d->ino, looked->ino);
  outage_->lose_reply = 1;
  auto f = held_->MkNode(kRootInode, "f", 0100644, 7, 8, 0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  // Someone else's entry of another type is not taken for ours.
  outage_->lose_reply = 1;
  auto clash = held_->MkNode(kRootInode, "x", 0100644, 7, 8, 0);
  ASSERT_TRUE(clash.ok());
  outage_->fail_before = 1;  // not applied: a plain retry
  auto again = held_->Mkdir(kRootInode, "x", 040755, 7, 8);
  EXPECT_EQ(again.status().code(), EEXIST);
}

TEST_F(HoldingMetaServiceTest, LostReplyOfRmdirAndRenameSucceed) {
  ASSERT_TRUE(store_->Mkdir(kRootInode, "d", 040755, 0, 0).ok());
  outage_->lose_reply = 1;
  EXPECT_TRUE(held_->Rmdir(kRootInode, "d").ok());
  ASSERT_TRUE(store_->MkNode(kRootInode, "a", 0100644, 0, 0, 0).ok());
  outage_->lose_reply = 1;
  uint64_t replaced = 99;
  EXPECT_TRUE(
      held_->Rename(kRootInode, "a", kRootInode, "b", 0, &replaced).ok());
  EXPECT_TRUE(store_->Lookup(kRootInode, "b").ok());
}

TEST_F(HoldingMetaServiceTest, LostReplyOfACommitIsRecognisedAsOurs) {
  auto f = store_->MkNode(kRootInode, "f", 0100644, 0, 0, 0);
  ASSERT_TRUE(f.ok());
  auto v = store_->AllocateVersions(1);
  ASSERT_TRUE(v.ok());
  StripeVersion sv;
  sv.stripe = 0;
  sv.version = *v;
  sv.chunk_len = 4096;
  outage_->lose_reply = 1;
  ObsoleteStripe obs;
  Status st = held_->CommitStripe(f->ino, sv, 0, 100, &obs);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto cur = store_->GetStripes(f->ino, 0, 1);
  ASSERT_TRUE(cur.ok());
  ASSERT_EQ(cur->size(), 1u);
  EXPECT_EQ(cur->front().version, *v);
  EXPECT_EQ(store_->GetAttr(f->ino)->size, 100u);
}

TEST_F(HoldingMetaServiceTest, CommitStripesIsOneCallAndALostReplyIsOurs) {
  auto f = store_->MkNode(kRootInode, "f", 0100644, 0, 0, 0);
  ASSERT_TRUE(f.ok());
  auto v = store_->AllocateVersions(3);
  ASSERT_TRUE(v.ok());
  std::vector<StripeCommit> commits(3);
  for (uint64_t s = 0; s < 3; ++s) {
    commits[s].sv.stripe = s;
    commits[s].sv.version = *v + s;
    commits[s].sv.chunk_len = 4096;
  }
  // Passed through as one call (not NotSupported, which made the client
  // commit, and sync, every stripe on its own).
  const int before = outage_->calls.load();
  std::vector<ObsoleteStripe> obs;
  Status st = held_->CommitStripes(f->ino, commits, 3 * 16384, &obs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(outage_->calls.load() - before, 1);
  EXPECT_EQ(obs.size(), 3u);
  // A lost reply: the retry gets ESTALE, yet every stripe is at the
  // version sent, so it is ours.
  auto w = store_->AllocateVersions(3);
  ASSERT_TRUE(w.ok());
  for (uint64_t s = 0; s < 3; ++s) {
    commits[s].expected_version = commits[s].sv.version;
    commits[s].sv.version = *w + s;
  }
  outage_->lose_reply = 1;
  st = held_->CommitStripes(f->ino, commits, 0, &obs);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto cur = store_->GetStripes(f->ino, 0, 3);
  ASSERT_TRUE(cur.ok());
  ASSERT_EQ(cur->size(), 3u);
  for (uint64_t s = 0; s < 3; ++s) EXPECT_EQ((*cur)[s].version, *w + s);
}

TEST_F(HoldingMetaServiceTest, LostReplyOfUnlinkIsEnoentAsDocumented) {
  ASSERT_TRUE(store_->MkNode(kRootInode, "f", 0100644, 0, 0, 0).ok());
  outage_->lose_reply = 1;
  auto u = held_->Unlink(kRootInode, "f");
  EXPECT_EQ(u.status().code(), ENOENT);  // known limit (header, cluster.md)
  auto orphans = store_->ListOrphans();
  ASSERT_TRUE(orphans.ok());
  EXPECT_EQ(orphans->size(), 1u);  // purged at the next mount
}

}  // namespace
}  // namespace stripefs
