// Unit tests of MetaStore: every operation, its error cases, and persistence.
#include "backend/meta/meta_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "backend/meta/meta_schema.h"
#include "backend/meta/rocks_kv.h"
#include "tests/meta/meta_test_util.h"

namespace stripefs {
namespace {

using testing::CheckInvariants;
using testing::Engine;
using testing::ReadAll;
using testing::TempDir;

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    auto _s = (expr);                                       \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)

template <typename T>
T Must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

template <typename T>
int Err(const Result<T>& r) {
  return r.ok() ? 0 : r.status().code();
}
int Err(const Status& s) { return s.code(); }

// Every MetaStoreTest runs on both engines: RocksDB in a temporary
// directory, and etcd (one loopback etcd per test process, a fresh key
// prefix per test; the etcd instantiation is one ctest entry, so one etcd).
class MetaStoreTest : public testing::MetaEngineFixture {
 protected:
  MetaStoreTest() : MetaEngineFixture("meta-test") {}
  void SetUp() override {
    MetaEngineFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    MetaStoreOptions o;
    o.root_uid = 1000;
    o.root_gid = 100;
    store_ = Must(MetaStore::Create(location_, geo_, o));
  }
  void Reopen() {
    store_.reset();
    store_ = Must(MetaStore::Open(location_));
  }
  uint64_t File(uint64_t parent, const std::string& name) {
    return Must(store_->MkNode(parent, name, S_IFREG | 0644, 1, 2, 0)).ino;
  }
  uint64_t Dir(uint64_t parent, const std::string& name) {
    return Must(store_->Mkdir(parent, name, 0755, 1, 2)).ino;
  }
  InodeAttr Attr(uint64_t ino) { return Must(store_->GetAttr(ino)); }
  std::set<std::string> Names(uint64_t dir) {
    std::set<std::string> n;
    for (auto& e : ReadAll(*store_, dir)) n.insert(e.name);
    return n;
  }
  // Commits a fresh version of `stripe` over whatever is there.
  uint64_t Commit(uint64_t ino, uint64_t stripe, uint64_t size) {
    auto cur = Must(store_->GetStripes(ino, stripe, 1));
    uint64_t expected = cur.empty() ? 0 : cur[0].version;
    uint64_t v = Must(store_->AllocateVersions(1));
    ObsoleteStripe ob;
    EXPECT_TRUE(
        store_->CommitStripe(ino, {stripe, v, 0}, expected, size, &ob).ok());
    EXPECT_EQ(ob.version, expected);
    return v;
  }

  Geometry geo_{4, 2, 64 * 1024};  // stripe = 256 KiB
  std::unique_ptr<MetaStore> store_;
};

// --- volume lifecycle
// ---------------------------------------------------------

TEST(MetaStoreLifecycle, CreateValidatesGeometry) {
  TempDir tmp;
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {0, 2, 4096})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {4, 0, 4096})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {30, 3, 4096})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {4, 2, 1000})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {4, 2, 2048})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {4, 2, 4096 + 512})), EINVAL);
  EXPECT_EQ(Err(MetaStore::Create(tmp.sub("a"), {4, 2, (64u << 20) + 4096})),
            EINVAL);
  EXPECT_FALSE(MetaStore::Exists(tmp.sub("a")));
  EXPECT_TRUE(MetaStore::Create(tmp.sub("b"), {16, 16, 64u << 20}).ok());
  EXPECT_TRUE(MetaStore::Create(tmp.sub("c"), {1, 1, 4096}).ok());
}

// namespace_sync_delay: namespace mutations are acknowledged before the WAL
// sync; Sync(), stripe commits and truncations sync it. (The delay is an
// hour here, so the background sync never runs during the checks.)
TEST(MetaStoreNamespaceSync, NamespaceChangesWaitForSyncOrDurableCommits) {
  TempDir tmp;
  MetaStoreOptions o;
  o.namespace_sync_delay = std::chrono::hours(1);
  auto s = Must(MetaStore::Create(tmp.sub("m"), {4, 2, 4096}, o));
  ASSERT_TRUE(s->Sync().ok());
  const uint64_t syncs = s->commit_stats().wal_syncs;
  auto f = Must(s->MkNode(kRootInode, "f", S_IFREG | 0644, 0, 0, 0));
  ASSERT_TRUE(s->Mkdir(kRootInode, "d", 0755, 0, 0).ok());
  ASSERT_TRUE(s->Unlink(kRootInode, "f").ok());
  ASSERT_TRUE(s->SetXattr(kRootInode, "user.x", "y", 0).ok());
  SetAttrRequest chmod;
  chmod.mask = kSetMode;
  chmod.mode = 0700;
  ASSERT_TRUE(s->SetAttr(kRootInode, chmod, nullptr).ok());
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs);  // acknowledged, unsynced
  ASSERT_TRUE(s->Sync().ok());
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs + 1);
  ASSERT_TRUE(s->Sync().ok());  // nothing new: no sync
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs + 1);
  // A stripe commit is durable when it returns, and so is everything
  // before it (one WAL sequence).
  auto g = Must(s->MkNode(kRootInode, "g", S_IFREG | 0644, 0, 0, 0));
  const uint64_t v = Must(s->AllocateVersions(1));
  const uint64_t after_alloc = s->commit_stats().wal_syncs;
  ASSERT_TRUE(s->CommitStripe(g.ino, {0, v, 0, 4096}, 0, 4096, nullptr).ok());
  EXPECT_EQ(s->commit_stats().wal_syncs, after_alloc + 1);
  SetAttrRequest trunc;
  trunc.mask = kSetSize;
  trunc.size = 0;
  ASSERT_TRUE(s->SetAttr(g.ino, trunc, nullptr).ok());
  EXPECT_EQ(s->commit_stats().wal_syncs, after_alloc + 2);
  (void)f;
}

TEST(MetaStoreNamespaceSync, BackgroundSyncCoversAcknowledgedChanges) {
  TempDir tmp;
  MetaStoreOptions o;
  o.namespace_sync_delay = std::chrono::milliseconds(1);
  auto s = Must(MetaStore::Create(tmp.sub("m"), {4, 2, 4096}, o));
  ASSERT_TRUE(s->Sync().ok());
  const uint64_t syncs = s->commit_stats().wal_syncs;
  ASSERT_TRUE(s->MkNode(kRootInode, "f", S_IFREG | 0644, 0, 0, 0).ok());
  // Bounded wait for the background thread (no Sync() call here).
  for (int i = 0; i < 2000 && s->commit_stats().wal_syncs == syncs; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(s->commit_stats().wal_syncs, syncs);
}

TEST(MetaStoreLifecycle, CreateTwiceIsEexistAndOpenChecks) {
  TempDir tmp;
  Geometry g{6, 3, 128 * 1024};
  {
    auto s = Must(MetaStore::Create(tmp.sub("v"), g));
    EXPECT_EQ(Must(s->GetGeometry()), g);
    auto root = Must(s->GetAttr(kRootInode));
    EXPECT_EQ(root.mode, static_cast<uint32_t>(S_IFDIR | 0755));
    EXPECT_EQ(root.nlink, 2u);
    EXPECT_EQ(root.uid, 0u);
    // The store is locked while open.
    EXPECT_EQ(Err(MetaStore::Open(tmp.sub("v"))), EBUSY);
  }
  auto again = MetaStore::Create(tmp.sub("v"), g);
  EXPECT_EQ(Err(again), EEXIST);
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  auto s = Must(MetaStore::Open(tmp.sub("v")));
  EXPECT_EQ(Must(s->GetGeometry()), g);
  s.reset();
  EXPECT_TRUE(MetaStore::OpenOrCreate(tmp.sub("v"), g).ok());
  EXPECT_EQ(Err(MetaStore::OpenOrCreate(tmp.sub("v"), Geometry{4, 2, 4096})),
            EINVAL);
  EXPECT_TRUE(MetaStore::OpenOrCreate(tmp.sub("w"), g).ok());
}

// The volume UUID servers bind into their handshake (issue 35): made with
// the volume, the same on every open, and made once for an older volume
// that has none.
TEST(MetaStoreLifecycle, VolumeUuidIsMadeOnceAndKept) {
  TempDir tmp;
  Geometry g{4, 2, 4096};
  VolumeUuid first;
  {
    auto s = Must(MetaStore::Create(tmp.sub("v"), g));
    first = s->volume_uuid();
    EXPECT_NE(first, VolumeUuid{});
  }
  EXPECT_EQ(Must(MetaStore::Open(tmp.sub("v")))->volume_uuid(), first);
  EXPECT_NE(Must(MetaStore::Create(tmp.sub("w"), g))->volume_uuid(), first);
  {
    // An older volume: no M volume_uuid record.
    auto kv = Must(RocksKv::Open(tmp.sub("v"), /*create=*/false));
    auto txn = kv->Begin();
    txn->Delete(meta_schema::MetaKey(meta_schema::kMetaVolumeUuid));
    auto ticket = txn->Commit();
    ASSERT_TRUE(ticket.ok());
    ASSERT_TRUE(kv->WaitDurable(*ticket).ok());
  }
  VolumeUuid made;
  {
    auto s = Must(MetaStore::Open(tmp.sub("v")));
    made = s->volume_uuid();
    EXPECT_NE(made, VolumeUuid{});
    EXPECT_NE(made, first);
  }
  EXPECT_EQ(Must(MetaStore::Open(tmp.sub("v")))->volume_uuid(), made);
}

TEST(MetaStoreLifecycle, OpenMissingOrForeign) {
  TempDir tmp;
  auto r = MetaStore::Open(tmp.sub("nothing"));
  EXPECT_EQ(Err(r), ENOENT);
  EXPECT_NE(r.status().message().find("no stripefs metadata store"),
            std::string::npos);
  // A RocksDB database that is not ours.
  { auto s = Must(MetaStore::Create(tmp.sub("x"), Geometry{})); }
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options o;
    ASSERT_TRUE(rocksdb::DB::Open(o, tmp.sub("x"), &raw).ok());
    rocksdb::WriteOptions wo;
    ASSERT_TRUE(
        raw->Put(wo, meta_schema::MetaKey(meta_schema::kMetaFormat),
                 meta_schema::EncodeU32(meta_schema::kFormatVersion + 1))
            .ok());
    delete raw;
  }
  r = MetaStore::Open(tmp.sub("x"));
  EXPECT_EQ(Err(r), EINVAL);
  EXPECT_NE(r.status().message().find("format version"), std::string::npos);
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options o;
    o.create_if_missing = true;
    ASSERT_TRUE(rocksdb::DB::Open(o, tmp.sub("foreign"), &raw).ok());
    delete raw;
  }
  r = MetaStore::Open(tmp.sub("foreign"));
  EXPECT_EQ(Err(r), EINVAL);
  EXPECT_NE(r.status().message().find("not a stripefs metadata store"),
            std::string::npos);
}

TEST_P(MetaStoreTest, RootOwnerFromOptions) {
  auto root = Attr(kRootInode);
  EXPECT_EQ(root.uid, 1000u);
  EXPECT_EQ(root.gid, 100u);
  EXPECT_EQ(root.ino, kRootInode);
  auto st = Must(store_->StatFs());
  EXPECT_EQ(st.inodes, 1u);
  EXPECT_EQ(st.bytes_used, 0u);
}

// --- create / lookup / getattr
// --------------------------------------------------

TEST_P(MetaStoreTest, MkNodeLookupGetAttr) {
  // The parent's times set far back first, so an update must show as a
  // change (a store that stopped updating them would pass a >= check).
  SetAttrRequest back;
  back.mask = kSetMtime | kSetCtime;
  back.mtime = {10, 0};
  back.ctime = {10, 0};
  Must(store_->SetAttr(kRootInode, back, nullptr));
  auto before = Attr(kRootInode);
  auto a = Must(store_->MkNode(kRootInode, "f", S_IFREG | 0640, 7, 8, 0));
  EXPECT_EQ(a.mode, static_cast<uint32_t>(S_IFREG | 0640));
  EXPECT_EQ(a.uid, 7u);
  EXPECT_EQ(a.gid, 8u);
  EXPECT_EQ(a.nlink, 1u);
  EXPECT_EQ(a.size, 0u);
  EXPECT_GT(a.ino, kRootInode);
  EXPECT_EQ(Must(store_->Lookup(kRootInode, "f")), a);
  EXPECT_EQ(Attr(a.ino), a);
  auto root = Attr(kRootInode);
  EXPECT_EQ(root.nlink, before.nlink);  // files do not change the parent nlink
  EXPECT_GT(root.mtime.sec, 10);
  EXPECT_EQ(root.ctime, root.mtime);
  // Type 0 means a regular file; devices keep rdev; others get rdev 0.
  EXPECT_EQ(Must(store_->MkNode(kRootInode, "z", 0600, 0, 0, 5)).mode,
            static_cast<uint32_t>(S_IFREG | 0600));
  auto c = Must(store_->MkNode(kRootInode, "c", S_IFCHR | 0600, 0, 0, 0x0103));
  EXPECT_EQ(c.rdev, 0x0103u);
  EXPECT_EQ(Must(store_->MkNode(kRootInode, "p", S_IFIFO | 0600, 0, 0, 9)).rdev,
            0u);
  EXPECT_TRUE(store_->MkNode(kRootInode, "s", S_IFSOCK | 0600, 0, 0, 0).ok());
  EXPECT_TRUE(store_->MkNode(kRootInode, "b", S_IFBLK | 0600, 0, 0, 1).ok());
  EXPECT_EQ(Err(store_->MkNode(kRootInode, "d", S_IFDIR | 0700, 0, 0, 0)),
            EINVAL);
  EXPECT_EQ(Err(store_->MkNode(kRootInode, "l", S_IFLNK | 0700, 0, 0, 0)),
            EINVAL);
  // Inode numbers are never reused.
  std::set<uint64_t> inos;
  for (auto& e : ReadAll(*store_, kRootInode)) {
    if (e.name != "." && e.name != "..") {
      EXPECT_TRUE(inos.insert(e.ino).second);
    }
  }
  EXPECT_EQ(inos.size(), 6u);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, CreateErrors) {
  File(kRootInode, "f");
  EXPECT_EQ(Err(store_->MkNode(kRootInode, "f", S_IFREG, 0, 0, 0)), EEXIST);
  EXPECT_EQ(Err(store_->Mkdir(kRootInode, "f", 0755, 0, 0)), EEXIST);
  EXPECT_EQ(Err(store_->Symlink(kRootInode, "f", "x", 0, 0)), EEXIST);
  for (const char* dots : {".", ".."}) {
    EXPECT_EQ(Err(store_->MkNode(kRootInode, dots, S_IFREG, 0, 0, 0)), EEXIST);
    EXPECT_EQ(Err(store_->Mkdir(kRootInode, dots, 0755, 0, 0)), EEXIST);
  }
  EXPECT_EQ(Err(store_->MkNode(kRootInode, "", S_IFIFO, 0, 0, 0)), EINVAL);
  EXPECT_EQ(Err(store_->Mkdir(kRootInode, "", 0755, 0, 0)), EINVAL);
  EXPECT_EQ(Err(store_->MkNode(kRootInode, "a/b", S_IFREG, 0, 0, 0)), EINVAL);
  EXPECT_EQ(
      Err(store_->MkNode(kRootInode, std::string("a\0b", 3), S_IFREG, 0, 0, 0)),
      EINVAL);
  EXPECT_EQ(
      Err(store_->MkNode(kRootInode, std::string(256, 'x'), S_IFREG, 0, 0, 0)),
      ENAMETOOLONG);
  EXPECT_TRUE(
      store_->MkNode(kRootInode, std::string(255, 'x'), S_IFREG, 0, 0, 0).ok());
  uint64_t f = Must(store_->Lookup(kRootInode, "f")).ino;
  EXPECT_EQ(Err(store_->MkNode(f, "g", S_IFREG, 0, 0, 0)), ENOTDIR);
  EXPECT_EQ(Err(store_->Mkdir(f, "g", 0755, 0, 0)), ENOTDIR);
  EXPECT_EQ(Err(store_->MkNode(999, "g", S_IFREG, 0, 0, 0)), ENOENT);
  EXPECT_EQ(Err(store_->Mkdir(999, "g", 0755, 0, 0)), ENOENT);
  CheckInvariants(*store_);
}

// CreateEntry: the create and the parent's setgid / default-ACL check in
// one transaction, returning the new inode and the parent as committed.
TEST_P(MetaStoreTest, CreateEntryInheritsSetgidAndReturnsTheParent) {
  const uint64_t plain =
      Must(store_->Mkdir(kRootInode, "plain", 0755, 1, 2)).ino;
  const uint64_t sgid =
      Must(store_->Mkdir(kRootInode, "sgid", 02775, 1, 50)).ino;
  const uint32_t both = kCreateInheritSetgid | kCreateUnlessDefaultAcl;

  // Outside a setgid directory: the caller's owner and mode as sent.
  auto c = Must(store_->CreateEntry({plain, "f", 0100640, 1000, 100, 0, both}));
  EXPECT_EQ(c.node.mode, 0100640u);
  EXPECT_EQ(c.node.gid, 100u);
  EXPECT_EQ(c.node.nlink, 1u);
  EXPECT_EQ(c.node, Must(store_->Lookup(plain, "f")));
  EXPECT_EQ(c.parent, Must(store_->GetAttr(plain)));

  // In a setgid directory: the parent's gid; a directory also gets S_ISGID.
  c = Must(store_->CreateEntry({sgid, "f", 0100640, 1000, 100, 0, both}));
  EXPECT_EQ(c.node.gid, 50u);
  EXPECT_EQ(c.node.mode, 0100640u);
  c = Must(store_->CreateEntry({sgid, "d", 040755, 1000, 100, 0, both}));
  EXPECT_EQ(c.node.gid, 50u);
  EXPECT_EQ(c.node.mode, 042755u);
  EXPECT_EQ(c.node.nlink, 2u);
  EXPECT_EQ(c.parent.nlink, 3u);  // the new directory's ".."
  EXPECT_EQ(c.parent, Must(store_->GetAttr(sgid)));
  // Without the flag the setgid parent is ignored.
  c = Must(store_->CreateEntry({sgid, "g", 0100600, 1000, 100, 0, 0}));
  EXPECT_EQ(c.node.gid, 100u);
  // Devices keep rdev, fifos do not.
  c = Must(store_->CreateEntry({plain, "dev", 020600, 0, 0, 0x0801, both}));
  EXPECT_EQ(c.node.rdev, 0x0801u);
  c = Must(store_->CreateEntry({plain, "fifo", 010600, 0, 0, 0x0801, both}));
  EXPECT_EQ(c.node.rdev, 0u);

  // A parent with a default ACL: nothing is created, the caller decides.
  ASSERT_TRUE(store_
                  ->SetXattr(plain, "system.posix_acl_default",
                             std::string("\x02\0\0\0", 4), 0)
                  .ok());
  const InodeAttr before = Must(store_->GetAttr(plain));
  EXPECT_EQ(Err(store_->CreateEntry({plain, "acl", 0100644, 0, 0, 0, both})),
            kCreateNeedsAcl);
  EXPECT_EQ(Err(store_->Lookup(plain, "acl")), ENOENT);
  EXPECT_EQ(Must(store_->GetAttr(plain)), before);
  EXPECT_TRUE(
      store_
          ->CreateEntry({plain, "acl", 0100644, 0, 0, 0, kCreateInheritSetgid})
          .ok());

  // Errors as MkNode's, and what CreateEntry does not make.
  EXPECT_EQ(Err(store_->CreateEntry({plain, "f", 0100644, 0, 0, 0, both})),
            EEXIST);
  EXPECT_EQ(Err(store_->CreateEntry({999, "x", 0100644, 0, 0, 0, both})),
            ENOENT);
  EXPECT_EQ(Err(store_->CreateEntry({plain, "", 0100644, 0, 0, 0, both})),
            EINVAL);
  EXPECT_EQ(Err(store_->CreateEntry({plain, "l", 0120777, 0, 0, 0, both})),
            EINVAL);
  EXPECT_EQ(Err(store_->CreateEntry({plain, "x", 0100644, 0, 0, 0, 1u << 7})),
            EINVAL);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, UnlinkEntryReturnsTheInodeAndTheParent) {
  const uint64_t d = Must(store_->Mkdir(kRootInode, "d", 0755, 0, 0)).ino;
  const uint64_t f = File(d, "f");
  ASSERT_TRUE(store_->Link(f, d, "g").ok());
  auto u = Must(store_->UnlinkEntry(d, "f"));
  EXPECT_EQ(u.node.ino, f);
  EXPECT_EQ(u.node.nlink, 1u);
  EXPECT_EQ(u.node, Must(store_->GetAttr(f)));
  EXPECT_EQ(u.parent, Must(store_->GetAttr(d)));
  EXPECT_EQ(u.parent.mtime, u.node.ctime);
  u = Must(store_->UnlinkEntry(d, "g"));
  EXPECT_EQ(u.node.nlink, 0u);  // an orphan now
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{f});
  EXPECT_EQ(Err(store_->UnlinkEntry(d, "g")), ENOENT);
  EXPECT_EQ(Err(store_->UnlinkEntry(kRootInode, "d")), EISDIR);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, LinkAndRenameEntryReturnWhatTheyCommitted) {
  const uint64_t d1 = Must(store_->Mkdir(kRootInode, "d1", 0755, 0, 0)).ino;
  const uint64_t d2 = Must(store_->Mkdir(kRootInode, "d2", 0755, 0, 0)).ino;
  const uint64_t f = File(d1, "f");
  const uint64_t g = File(d2, "g");
  auto l = Must(store_->LinkEntry(f, d2, "l"));
  EXPECT_EQ(l.node.nlink, 2u);
  EXPECT_EQ(l.node, Must(store_->GetAttr(f)));
  EXPECT_EQ(l.parent, Must(store_->GetAttr(d2)));
  // Across directories, over an existing file.
  auto r = Must(store_->RenameEntry(d1, "f", d2, "g", 0));
  EXPECT_EQ(r.node, Must(store_->GetAttr(f)));
  EXPECT_EQ(r.parent, Must(store_->GetAttr(d1)));
  EXPECT_EQ(r.new_parent, Must(store_->GetAttr(d2)));
  EXPECT_EQ(r.parent.mtime, r.node.ctime);
  EXPECT_EQ(r.replaced, g);
  ASSERT_TRUE(r.replaced_attr.has_value());
  EXPECT_EQ(*r.replaced_attr, Must(store_->GetAttr(g)));
  EXPECT_EQ(r.replaced_attr->nlink, 0u);
  // Within one directory: the same attributes twice; no replaced inode.
  r = Must(store_->RenameEntry(d2, "g", d2, "h", 0));
  EXPECT_EQ(r.parent, r.new_parent);
  EXPECT_EQ(r.new_parent, Must(store_->GetAttr(d2)));
  EXPECT_EQ(r.replaced, 0u);
  EXPECT_FALSE(r.replaced_attr.has_value());
  // Two names of one inode: nothing changes.
  const InodeAttr before = Must(store_->GetAttr(d2));
  r = Must(store_->RenameEntry(d2, "l", d2, "h", 0));
  EXPECT_EQ(r.new_parent, before);
  EXPECT_EQ(Must(store_->GetAttr(d2)), before);
  EXPECT_EQ(Err(store_->RenameEntry(d2, "nope", d2, "x", 0)), ENOENT);
  EXPECT_EQ(Err(store_->LinkEntry(d1, d2, "dir")), EPERM);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, LookupErrorsAndDots) {
  uint64_t d = Dir(kRootInode, "d");
  uint64_t f = File(d, "f");
  EXPECT_EQ(Must(store_->Lookup(d, ".")).ino, d);
  EXPECT_EQ(Must(store_->Lookup(d, "..")).ino, kRootInode);
  EXPECT_EQ(Must(store_->Lookup(kRootInode, "..")).ino, kRootInode);
  EXPECT_EQ(Err(store_->Lookup(d, "nope")), ENOENT);
  EXPECT_EQ(Err(store_->Lookup(d, "")), ENOENT);
  EXPECT_EQ(Err(store_->Lookup(d, std::string(256, 'a'))), ENAMETOOLONG);
  EXPECT_EQ(Err(store_->Lookup(f, "x")), ENOTDIR);
  EXPECT_EQ(Err(store_->Lookup(12345, "x")), ENOENT);
  EXPECT_EQ(Err(store_->GetAttr(12345)), ENOENT);
  EXPECT_EQ(Err(store_->GetAttr(0)), ENOENT);
}

TEST_P(MetaStoreTest, MkdirRmdirNlink) {
  uint64_t a = Dir(kRootInode, "a");
  EXPECT_EQ(Attr(kRootInode).nlink, 3u);
  EXPECT_EQ(Attr(a).nlink, 2u);
  uint64_t b = Dir(a, "b");
  Dir(a, "c");
  EXPECT_EQ(Attr(a).nlink, 4u);
  EXPECT_EQ(Must(store_->Lookup(b, "..")).ino, a);
  uint64_t f = File(b, "f");
  EXPECT_EQ(Err(store_->Rmdir(a, "b")), ENOTEMPTY);
  EXPECT_EQ(Err(store_->Rmdir(b, "f")), ENOTDIR);
  EXPECT_EQ(Err(store_->Rmdir(a, "nope")), ENOENT);
  EXPECT_EQ(Err(store_->Rmdir(a, ".")), EINVAL);
  EXPECT_EQ(Err(store_->Rmdir(a, "..")), ENOTEMPTY);
  EXPECT_EQ(Err(store_->Rmdir(a, "")), EINVAL);
  EXPECT_EQ(Err(store_->Unlink(a, "b")), EISDIR);
  ASSERT_TRUE(store_->Unlink(b, "f").ok());
  ASSERT_TRUE(store_->Rmdir(a, "b").ok());
  EXPECT_EQ(Attr(a).nlink, 3u);
  // The removed directory is an orphan until purged (open handles).
  EXPECT_EQ(Attr(b).nlink, 0u);
  EXPECT_EQ(Must(store_->ReadDir(b, 0, 10)).size(), 2u);  // "." and ".."
  EXPECT_EQ(Err(store_->Lookup(a, "b")), ENOENT);
  EXPECT_EQ(Must(store_->ListOrphans()), (std::vector<uint64_t>{b, f}));
  std::vector<ObsoleteStripe> ob;
  ASSERT_TRUE(store_->PurgeInode(b, &ob).ok());
  EXPECT_EQ(Err(store_->GetAttr(b)), ENOENT);
  ASSERT_TRUE(store_->SetXattr(a, "user.x", "1", 0).ok());
  ASSERT_TRUE(store_->Rmdir(a, "c").ok());
  ASSERT_TRUE(store_->Rmdir(kRootInode, "a").ok());
  EXPECT_EQ(Attr(kRootInode).nlink, 2u);
  EXPECT_EQ(Must(store_->ListXattr(a)).size(), 1u);  // kept until purged
  ASSERT_TRUE(store_->PurgeInode(a, &ob).ok());
  EXPECT_EQ(Err(store_->ListXattr(a)), ENOENT);
  auto c = CheckInvariants(*store_);
  EXPECT_EQ(c.dirs, 1u);
  EXPECT_EQ(c.orphans, 2u);  // "f" and directory "c": never purged
}

TEST_P(MetaStoreTest, SymlinkAndReadLink) {
  auto l = Must(store_->Symlink(kRootInode, "l", "../some/target", 3, 4));
  EXPECT_EQ(l.mode, static_cast<uint32_t>(S_IFLNK | 0777));
  EXPECT_EQ(l.size, 14u);
  EXPECT_EQ(l.uid, 3u);
  EXPECT_EQ(Must(store_->ReadLink(l.ino)), "../some/target");
  uint64_t f = File(kRootInode, "f");
  EXPECT_EQ(Err(store_->ReadLink(f)), EINVAL);
  EXPECT_EQ(Err(store_->ReadLink(999)), ENOENT);
  EXPECT_EQ(Err(store_->Symlink(kRootInode, "e", "", 0, 0)), ENOENT);
  EXPECT_EQ(Err(store_->Symlink(kRootInode, "e", std::string(4096, 'a'), 0, 0)),
            ENAMETOOLONG);
  EXPECT_TRUE(
      store_->Symlink(kRootInode, "m", std::string(4095, 'a'), 0, 0).ok());
  Reopen();
  EXPECT_EQ(Must(store_->ReadLink(l.ino)), "../some/target");
  ASSERT_TRUE(store_->Unlink(kRootInode, "l").ok());
  std::vector<ObsoleteStripe> ob;
  ASSERT_TRUE(store_->PurgeInode(l.ino, &ob).ok());
  EXPECT_EQ(Err(store_->ReadLink(l.ino)), ENOENT);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, LinkCountsAndErrors) {
  uint64_t d = Dir(kRootInode, "d");
  uint64_t f = File(kRootInode, "f");
  auto a = Must(store_->Link(f, d, "g"));
  EXPECT_EQ(a.nlink, 2u);
  EXPECT_EQ(Must(store_->Lookup(d, "g")).ino, f);
  EXPECT_EQ(Attr(d).nlink, 2u);
  EXPECT_EQ(Err(store_->Link(d, kRootInode, "d2")), EPERM);
  EXPECT_EQ(Err(store_->Link(f, d, "g")), EEXIST);
  EXPECT_EQ(Err(store_->Link(f, d, ".")), EEXIST);
  EXPECT_EQ(Err(store_->Link(f, f, "x")), ENOTDIR);
  EXPECT_EQ(Err(store_->Link(f, 999, "x")), ENOENT);
  EXPECT_EQ(Err(store_->Link(999, d, "x")), ENOENT);
  EXPECT_EQ(Err(store_->Link(f, d, std::string(256, 'n'))), ENAMETOOLONG);
  auto u = Must(store_->Unlink(kRootInode, "f"));
  EXPECT_EQ(u.nlink, 1u);
  EXPECT_TRUE(Must(store_->ListOrphans()).empty());
  u = Must(store_->Unlink(d, "g"));
  EXPECT_EQ(u.nlink, 0u);
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{f});
  // An orphan cannot get new links.
  EXPECT_EQ(Err(store_->Link(f, d, "back")), ENOENT);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, AnonymousFileIsAnOrphanUntilItsFirstLink) {
  uint64_t d = Dir(kRootInode, "d");
  auto t = Must(store_->MkNode(d, "", S_IFREG | 0600, 5, 6, 0));
  EXPECT_EQ(t.nlink, 0u);
  EXPECT_EQ(t.mode, static_cast<uint32_t>(S_IFREG | 0600));
  EXPECT_EQ(t.uid, 5u);
  EXPECT_EQ(Must(store_->ReadDir(d, 0, 10)).size(), 2u);  // no entry
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{t.ino});
  CheckInvariants(*store_);
  EXPECT_EQ(Err(store_->MkNode(t.ino, "", S_IFREG | 0600, 0, 0, 0)), ENOTDIR);
  EXPECT_EQ(Err(store_->MkNode(d, "", S_IFCHR | 0600, 0, 0, 0)), EINVAL);
  Commit(t.ino, 0, 5000);
  auto l = Must(store_->Link(t.ino, kRootInode, "named"));
  EXPECT_EQ(l.nlink, 1u);
  EXPECT_EQ(l.size, 5000u);
  EXPECT_TRUE(Must(store_->ListOrphans()).empty());
  // Unlinked again it is an ordinary orphan: no second resurrection.
  ASSERT_TRUE(store_->Unlink(kRootInode, "named").ok());
  EXPECT_EQ(Err(store_->Link(t.ino, kRootInode, "again")), ENOENT);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, DropStripesPunchesWholeStripesAndKeepsTheSize) {
  uint64_t f = File(kRootInode, "f");
  std::vector<uint64_t> v;
  const uint64_t S = geo_.stripe_size();
  for (uint64_t s = 0; s < 4; ++s) v.push_back(Commit(f, s, (s + 1) * S));
  std::vector<ObsoleteStripe> ob;
  ASSERT_TRUE(store_->DropStripes(f, 1, 2, &ob).ok());
  EXPECT_EQ(ob, (std::vector<ObsoleteStripe>{{f, 1, v[1]}, {f, 2, v[2]}}));
  auto left = Must(store_->GetStripes(f, 0, 10));
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].stripe, 0u);
  EXPECT_EQ(left[1].stripe, 3u);
  EXPECT_EQ(Attr(f).size, 4 * S);
  ob.clear();
  ASSERT_TRUE(store_->DropStripes(f, 1, 2, &ob).ok());  // already holes
  EXPECT_TRUE(ob.empty());
  EXPECT_EQ(Err(store_->DropStripes(f, 0, 0, &ob)), EINVAL);
  EXPECT_EQ(Err(store_->DropStripes(kRootInode, 0, 1, &ob)), EINVAL);
  EXPECT_EQ(Err(store_->DropStripes(999, 0, 1, &ob)), ENOENT);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, UnlinkOrphanAndPurge) {
  uint64_t f = File(kRootInode, "f");
  uint64_t v0 = Commit(f, 0, 1000);
  uint64_t v1 = Commit(f, 1, 300000);
  ASSERT_TRUE(store_->SetXattr(f, "user.a", "b", 0).ok());
  EXPECT_EQ(Must(store_->StatFs()).bytes_used, 300000u);
  std::vector<ObsoleteStripe> ob;
  EXPECT_EQ(Err(store_->PurgeInode(f, &ob)), EBUSY);
  EXPECT_EQ(Err(store_->Unlink(kRootInode, "missing")), ENOENT);
  EXPECT_EQ(Err(store_->Unlink(kRootInode, ".")), EISDIR);
  EXPECT_EQ(Err(store_->Unlink(f, "x")), ENOTDIR);
  auto a = Must(store_->Unlink(kRootInode, "f"));
  EXPECT_EQ(a.ino, f);
  EXPECT_EQ(a.nlink, 0u);
  EXPECT_EQ(a.size, 300000u);
  // The orphan keeps attributes, stripes and xattrs until purged.
  EXPECT_EQ(Attr(f).nlink, 0u);
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 10)).size(), 2u);
  EXPECT_EQ(Must(store_->GetXattr(f, "user.a")), "b");
  EXPECT_EQ(Must(store_->StatFs()).inodes, 2u);
  CheckInvariants(*store_);
  Reopen();
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{f});
  ASSERT_TRUE(store_->PurgeInode(f, &ob).ok());
  ASSERT_EQ(ob.size(), 2u);
  EXPECT_EQ(ob[0].inode, f);
  EXPECT_EQ(ob[0].stripe, 0u);
  EXPECT_EQ(ob[0].version, v0);
  EXPECT_EQ(ob[1].stripe, 1u);
  EXPECT_EQ(ob[1].version, v1);
  EXPECT_EQ(Err(store_->GetAttr(f)), ENOENT);
  EXPECT_EQ(Err(store_->PurgeInode(f, &ob)), ENOENT);
  EXPECT_TRUE(Must(store_->ListOrphans()).empty());
  auto st = Must(store_->StatFs());
  EXPECT_EQ(st.inodes, 1u);
  EXPECT_EQ(st.bytes_used, 0u);
  auto c = CheckInvariants(*store_);
  EXPECT_EQ(c.stripes, 0u);
}

TEST_P(MetaStoreTest, PurgeInodesRemovesAGroupInOneCommit) {
  // More orphans than one etcd transaction holds (it splits into groups).
  constexpr int kOrphans = 40;
  std::vector<uint64_t> orphans;
  std::vector<uint64_t> versions;
  for (int i = 0; i < kOrphans; ++i) {
    const std::string name = "f" + std::to_string(i);
    uint64_t f = File(kRootInode, name);
    if (i % 2 == 0) versions.push_back(Commit(f, 0, 1000));
    if (i % 3 == 0) {
      ASSERT_TRUE(store_->SetXattr(f, "user.a", "b", 0).ok());
    }
    ASSERT_TRUE(store_->Unlink(kRootInode, name).ok());
    orphans.push_back(f);
  }
  uint64_t linked = File(kRootInode, "linked");
  Commit(linked, 0, 10);
  std::vector<uint64_t> inos = orphans;
  inos.push_back(linked);
  inos.push_back(999999);      // never existed
  inos.push_back(orphans[0]);  // twice: purged once
  const auto before = store_->commit_stats();
  std::vector<int32_t> codes;
  std::vector<ObsoleteStripe> ob;
  ASSERT_TRUE(store_->PurgeInodes(inos, &codes, &ob).ok());
  if (GetParam() == Engine::kRocksDb) {
    EXPECT_EQ(store_->commit_stats().mutations - before.mutations, 1u);
  }
  ASSERT_EQ(codes.size(), inos.size());
  for (int i = 0; i < kOrphans; ++i) EXPECT_EQ(codes[i], 0) << i;
  EXPECT_EQ(codes[kOrphans], EBUSY);
  EXPECT_EQ(codes[kOrphans + 1], ENOENT);
  EXPECT_EQ(codes[kOrphans + 2], ENOENT);
  // Every committed stripe of the purged orphans comes back, once.
  ASSERT_EQ(ob.size(), versions.size());
  for (size_t i = 0; i < ob.size(); ++i) {
    EXPECT_EQ(ob[i].inode, orphans[2 * i]);
    EXPECT_EQ(ob[i].stripe, 0u);
    EXPECT_EQ(ob[i].version, versions[i]);
  }
  for (uint64_t f : orphans) EXPECT_EQ(Err(store_->GetAttr(f)), ENOENT);
  EXPECT_EQ(Attr(linked).nlink, 1u);
  EXPECT_TRUE(Must(store_->ListOrphans()).empty());
  auto st = Must(store_->StatFs());
  EXPECT_EQ(st.inodes, 2u);  // root and "linked"
  EXPECT_EQ(st.bytes_used, 10u);
  auto c = CheckInvariants(*store_);
  EXPECT_EQ(c.stripes, 1u);
  Reopen();
  EXPECT_EQ(Err(store_->GetAttr(orphans[1])), ENOENT);
  // Nothing to do and too much to do.
  ASSERT_TRUE(store_->PurgeInodes({}, &codes, &ob).ok());
  EXPECT_TRUE(codes.empty());
  std::vector<uint64_t> huge(kMaxInodesPerPurge + 1, 999999);
  EXPECT_EQ(store_->PurgeInodes(huge, &codes, &ob).code(), EINVAL);
}

TEST_P(MetaStoreTest, ListOrphanStripesListsAGroupInOneCall) {
  // Orphans with 0, 1 and 3 stripes (one a hole), a linked file, a missing
  // inode, an empty orphan and an orphaned directory.
  constexpr int kOrphans = 12;
  std::vector<uint64_t> orphans;
  std::vector<ObsoleteStripe> expect;
  for (int i = 0; i < kOrphans; ++i) {
    const std::string name = "f" + std::to_string(i);
    uint64_t f = File(kRootInode, name);
    const int stripes = i % 3 == 0 ? 0 : (i % 3 == 1 ? 1 : 3);
    for (int s = 0; s < stripes; ++s) {
      if (stripes == 3 && s == 1) continue;  // a hole
      const uint64_t stripe = static_cast<uint64_t>(s);
      expect.push_back({f, stripe, Commit(f, stripe, (stripe + 1) * 1000)});
    }
    ASSERT_TRUE(store_->Unlink(kRootInode, name).ok());
    orphans.push_back(f);
  }
  uint64_t linked = File(kRootInode, "linked");
  Commit(linked, 0, 10);
  uint64_t dir = Dir(kRootInode, "d");
  ASSERT_TRUE(store_->Rmdir(kRootInode, "d").ok());
  std::vector<uint64_t> inos = orphans;
  inos.push_back(linked);
  inos.push_back(999999);  // never existed
  inos.push_back(dir);     // an orphaned directory: no stripes
  std::vector<int32_t> codes = {7};
  std::vector<ObsoleteStripe> got;
  ASSERT_TRUE(store_->ListOrphanStripes(inos, &codes, &got).ok());
  ASSERT_EQ(codes.size(), inos.size());
  for (int i = 0; i < kOrphans; ++i) EXPECT_EQ(codes[i], 0) << i;
  EXPECT_EQ(codes[kOrphans], EBUSY);
  EXPECT_EQ(codes[kOrphans + 1], ENOENT);
  EXPECT_EQ(codes[kOrphans + 2], 0);
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].inode, expect[i].inode) << i;
    EXPECT_EQ(got[i].stripe, expect[i].stripe) << i;
    EXPECT_EQ(got[i].version, expect[i].version) << i;
  }
  // A read: nothing changed, the orphans are still listed and purgeable,
  // and the purge drops exactly the stripes that were listed.
  EXPECT_EQ(Must(store_->ListOrphans()).size(), orphans.size() + 1);
  std::vector<ObsoleteStripe> dropped;
  ASSERT_TRUE(store_->PurgeInodes(inos, &codes, &dropped).ok());
  EXPECT_EQ(dropped.size(), expect.size());
  ASSERT_TRUE(store_->ListOrphanStripes(orphans, &codes, &got).ok());
  for (int32_t c : codes) EXPECT_EQ(c, ENOENT);
  // Nothing to do and too much to do.
  got.clear();
  ASSERT_TRUE(store_->ListOrphanStripes({}, &codes, &got).ok());
  EXPECT_TRUE(codes.empty());
  EXPECT_TRUE(got.empty());
  std::vector<uint64_t> huge(kMaxInodesPerPurge + 1, 999999);
  EXPECT_EQ(store_->ListOrphanStripes(huge, &codes, &got).code(), EINVAL);
}

// ListOrphanStripes makes the unlinks durable only when chunks will be
// deleted on its answer: a group of empty orphans (no stripes) is not
// synced, a group with a stripe is (and so is everything before it).
TEST(MetaStoreOrphanStripes, SyncsOnlyWhenAnOrphanHasStripes) {
  TempDir tmp;
  MetaStoreOptions o;
  o.namespace_sync_delay = std::chrono::hours(1);  // no background sync
  auto s = Must(MetaStore::Create(tmp.sub("m"), {4, 2, 4096}, o));
  std::vector<uint64_t> empty;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "e" + std::to_string(i);
    empty.push_back(
        Must(s->MkNode(kRootInode, name, S_IFREG | 0644, 0, 0, 0)).ino);
    ASSERT_TRUE(s->Unlink(kRootInode, name).ok());
  }
  ASSERT_TRUE(s->Sync().ok());
  uint64_t syncs = s->commit_stats().wal_syncs;
  // A new empty orphan, unsynced: listing the group leaves it unsynced.
  const uint64_t e3 =
      Must(s->MkNode(kRootInode, "e3", S_IFREG | 0644, 0, 0, 0)).ino;
  ASSERT_TRUE(s->Unlink(kRootInode, "e3").ok());
  empty.push_back(e3);
  std::vector<int32_t> codes;
  std::vector<ObsoleteStripe> got;
  ASSERT_TRUE(s->ListOrphanStripes(empty, &codes, &got).ok());
  ASSERT_EQ(codes, std::vector<int32_t>(empty.size(), 0));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs);
  // The group purges without a sync either (nothing to delete).
  std::vector<ObsoleteStripe> dropped;
  ASSERT_TRUE(s->PurgeInodes(empty, &codes, &dropped).ok());
  ASSERT_EQ(codes, std::vector<int32_t>(empty.size(), 0));
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs);
  // An orphan with a stripe among empty ones: one sync before the answer.
  const uint64_t e4 =
      Must(s->MkNode(kRootInode, "e4", S_IFREG | 0644, 0, 0, 0)).ino;
  auto d = Must(s->MkNode(kRootInode, "d", S_IFREG | 0644, 0, 0, 0));
  const uint64_t v = Must(s->AllocateVersions(1));
  ASSERT_TRUE(s->CommitStripe(d.ino, {0, v, 0, 4096}, 0, 4096, nullptr).ok());
  ASSERT_TRUE(s->Unlink(kRootInode, "e4").ok());
  ASSERT_TRUE(s->Unlink(kRootInode, "d").ok());
  syncs = s->commit_stats().wal_syncs;
  got.clear();
  ASSERT_TRUE(s->ListOrphanStripes({e4, d.ino}, &codes, &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].version, v);
  EXPECT_EQ(s->commit_stats().wal_syncs, syncs + 1);
}

// An answer holds at most kMaxOrphanStripes: an orphan whose stripes do
// not fit is E2BIG with none of them listed, and the others still come.
// RocksDB only: the bound is engine-independent code, and 65,536 stripe
// commits would take minutes on etcd.
TEST(MetaStoreOrphanStripes, ListOrphanStripesBoundsTheAnswer) {
  TempDir tmp;
  MetaStoreOptions o;
  o.sync = false;
  auto store = Must(MetaStore::Create(tmp.sub("m"), {4, 2, 64 * 1024}, o));
  auto File = [&](uint64_t parent, const std::string& name) {
    return Must(store->MkNode(parent, name, S_IFREG | 0644, 1, 2, 0)).ino;
  };
  uint64_t small = File(kRootInode, "small");
  const uint64_t v = Must(store->AllocateVersions(1));
  ASSERT_TRUE(store->CommitStripe(small, {0, v, 0}, 0, 100, nullptr).ok());
  uint64_t big = File(kRootInode, "big");
  // kMaxOrphanStripes stripes in few commits (CommitStripes, 1024 each).
  for (uint64_t s = 0; s < kMaxOrphanStripes;) {
    std::vector<StripeCommit> batch;
    const uint64_t n = std::min<uint64_t>(1024, kMaxOrphanStripes - s);
    const uint64_t base =
        Must(store->AllocateVersions(static_cast<uint32_t>(n)));
    for (uint64_t j = 0; j < n; ++j) batch.push_back({{s + j, base + j, 0}, 0});
    std::vector<ObsoleteStripe> ob;
    ASSERT_TRUE(
        store->CommitStripes(big, batch, (s + n) * 256 * 1024, &ob).ok());
    s += n;
  }
  ASSERT_TRUE(store->Unlink(kRootInode, "small").ok());
  ASSERT_TRUE(store->Unlink(kRootInode, "big").ok());
  std::vector<int32_t> codes;
  std::vector<ObsoleteStripe> got;
  // small first: 1 stripe listed, then big's 65,536 do not fit.
  ASSERT_TRUE(store->ListOrphanStripes({small, big}, &codes, &got).ok());
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], E2BIG);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].version, v);
  // Alone, big fits exactly.
  got.clear();
  ASSERT_TRUE(store->ListOrphanStripes({big}, &codes, &got).ok());
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(got.size(), kMaxOrphanStripes);
}

// --- setattr
// ------------------------------------------------------------------

TEST_P(MetaStoreTest, SetAttrFields) {
  uint64_t f = File(kRootInode, "f");
  SetAttrRequest r;
  r.mask = kSetMode | kSetUid | kSetGid | kSetAtime | kSetMtime;
  r.mode = S_IFDIR | 04711;  // type bits are ignored
  r.uid = 55;
  r.gid = 66;
  r.atime = {1000, 5};
  r.mtime = {2000, 6};
  auto a = Must(store_->SetAttr(f, r, nullptr));
  EXPECT_EQ(a.mode, static_cast<uint32_t>(S_IFREG | 04711));
  EXPECT_EQ(a.uid, 55u);
  EXPECT_EQ(a.gid, 66u);
  EXPECT_EQ(a.atime, (Timespec{1000, 5}));
  EXPECT_EQ(a.mtime, (Timespec{2000, 6}));
  EXPECT_GT(a.ctime.sec, 2000);
  r = {};
  r.mask = kSetCtime | kSetAtimeNow | kSetMtimeNow;
  r.ctime = {3000, 7};
  a = Must(store_->SetAttr(f, r, nullptr));
  EXPECT_EQ(a.ctime, (Timespec{3000, 7}));
  EXPECT_GT(a.atime.sec, 3000);
  EXPECT_EQ(a.atime, a.mtime);
  EXPECT_EQ(Attr(f), a);
  EXPECT_EQ(Err(store_->SetAttr(999, r, nullptr)), ENOENT);
  // Size on non-regular files.
  uint64_t d = Dir(kRootInode, "d");
  uint64_t l = Must(store_->Symlink(kRootInode, "l", "t", 0, 0)).ino;
  r = {};
  r.mask = kSetSize;
  r.size = 10;
  EXPECT_EQ(Err(store_->SetAttr(d, r, nullptr)), EISDIR);
  EXPECT_EQ(Err(store_->SetAttr(l, r, nullptr)), EINVAL);
  // Empty mask changes nothing.
  auto before = Attr(f);
  EXPECT_EQ(Must(store_->SetAttr(f, SetAttrRequest{}, nullptr)), before);
  Reopen();
  EXPECT_EQ(Attr(f), before);
}

TEST_P(MetaStoreTest, SizeAtLeastOnlyRaises) {
  const uint64_t S = geo_.stripe_size();
  uint64_t f = File(kRootInode, "f");
  Commit(f, 0, S);
  Commit(f, 2, 2 * S);  // committed past a gap: size held at 2S
  SetAttrRequest r;
  r.mask = kSetSize | kSetSizeAtLeast;
  r.size = S;  // lower: nothing changes, nothing dropped
  std::vector<ObsoleteStripe> ob;
  EXPECT_EQ(Must(store_->SetAttr(f, r, &ob)).size, 2 * S);
  EXPECT_TRUE(ob.empty());
  r.size = 3 * S;
  EXPECT_EQ(Must(store_->SetAttr(f, r, &ob)).size, 3 * S);
  EXPECT_TRUE(ob.empty());
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 10)).size(), 2u);
  Reopen();
  EXPECT_EQ(Attr(f).size, 3 * S);
}

TEST_P(MetaStoreTest, TruncateDropsStripesWhollyPastNewSize) {
  const uint64_t S = geo_.stripe_size();
  uint64_t f = File(kRootInode, "f");
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < 6; ++i) v.push_back(Commit(f, i, (i + 1) * S));
  uint64_t g = File(kRootInode, "g");  // another file's stripes stay put
  uint64_t gv = Commit(g, 3, 4 * S);
  EXPECT_EQ(Attr(f).size, 6 * S);
  EXPECT_EQ(Must(store_->StatFs()).bytes_used, 10 * S);

  auto truncate = [&](uint64_t size) {
    SetAttrRequest r;
    r.mask = kSetSize;
    r.size = size;
    std::vector<ObsoleteStripe> ob;
    auto a = Must(store_->SetAttr(f, r, &ob));
    EXPECT_EQ(a.size, size);
    std::vector<uint64_t> dropped;
    for (auto& o : ob) {
      EXPECT_EQ(o.inode, f);
      EXPECT_EQ(o.version, v[o.stripe]);
      dropped.push_back(o.stripe);
    }
    return dropped;
  };
  // 4*S + 1 needs stripes 0..4: only 5 goes.
  EXPECT_EQ(truncate(4 * S + 1), std::vector<uint64_t>{5});
  // Exactly 3*S: stripe 3 holds nothing any more.
  EXPECT_EQ(truncate(3 * S), std::vector<uint64_t>({3, 4}));
  // Growing drops nothing and keeps stripes.
  EXPECT_TRUE(truncate(8 * S).empty());
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 100)).size(), 3u);
  EXPECT_EQ(truncate(S - 1), std::vector<uint64_t>({1, 2}));
  EXPECT_EQ(truncate(0), std::vector<uint64_t>{0});
  EXPECT_TRUE(Must(store_->GetStripes(f, 0, 100)).empty());
  auto gs = Must(store_->GetStripes(g, 0, 100));
  ASSERT_EQ(gs.size(), 1u);
  EXPECT_EQ(gs[0].version, gv);
  EXPECT_EQ(Must(store_->StatFs()).bytes_used, 4 * S);
  // A writer that still expects a dropped version gets ESTALE.
  uint64_t nv = Must(store_->AllocateVersions(1));
  EXPECT_EQ(store_->CommitStripe(f, {5, nv, 0}, v[5], 6 * S, nullptr).code(),
            ESTALE);
  CheckInvariants(*store_);
}

// --- readdir
// ------------------------------------------------------------------

TEST_P(MetaStoreTest, ReadDirBasics) {
  uint64_t d = Dir(kRootInode, "d");
  uint64_t sub = Dir(d, "sub");
  File(d, "f");
  Must(store_->Symlink(d, "l", "x", 0, 0));
  auto all = ReadAll(*store_, d, 1);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].name, ".");
  EXPECT_EQ(all[0].ino, d);
  EXPECT_EQ(all[1].name, "..");
  EXPECT_EQ(all[1].ino, kRootInode);
  EXPECT_EQ(all[2].name, "sub");
  EXPECT_EQ(all[2].ino, sub);
  EXPECT_EQ(all[2].mode & S_IFMT, static_cast<uint32_t>(S_IFDIR));
  EXPECT_EQ(all[3].mode & S_IFMT, static_cast<uint32_t>(S_IFREG));
  EXPECT_EQ(all[4].mode & S_IFMT, static_cast<uint32_t>(S_IFLNK));
  EXPECT_EQ(ReadAll(*store_, d, 100).size(), 5u);
  EXPECT_TRUE(Must(store_->ReadDir(d, all.back().cookie, 10)).empty());
  EXPECT_TRUE(Must(store_->ReadDir(d, 0, 0)).empty());
  EXPECT_TRUE(Must(store_->ReadDir(d, UINT64_MAX, 10)).empty());
  uint64_t f = Must(store_->Lookup(d, "f")).ino;
  EXPECT_EQ(Err(store_->ReadDir(f, 0, 10)), ENOTDIR);
  EXPECT_EQ(Err(store_->ReadDir(999, 0, 10)), ENOENT);
  // Root's '..' is itself.
  auto root = Must(store_->ReadDir(kRootInode, 0, 2));
  ASSERT_EQ(root.size(), 2u);
  EXPECT_EQ(root[1].ino, kRootInode);
}

TEST_P(MetaStoreTest, ReadDirCookiesStableUnderConcurrentChanges) {
  uint64_t d = Dir(kRootInode, "d");
  std::set<std::string> live;
  for (int i = 0; i < 200; ++i) {
    File(d, "f" + std::to_string(i));
    live.insert("f" + std::to_string(i));
  }
  std::set<std::string> stable = live;  // present for the whole listing
  std::set<std::string> seen;
  uint64_t cookie = 0;
  int step = 0;
  std::mt19937 rng(42);
  for (int guard = 0; guard < 10000; ++guard) {
    auto page = Must(store_->ReadDir(d, cookie, 9));
    if (page.empty()) break;
    for (auto& e : page) {
      EXPECT_GT(e.cookie, cookie);
      cookie = e.cookie;
      EXPECT_TRUE(seen.insert(e.name).second) << e.name << " returned twice";
    }
    // Between calls (for the first pages, so the listing ends): insert new
    // names and delete read and unread ones.
    if (guard >= 25) continue;
    for (int j = 0; j < 3; ++j) {
      std::string n = "n" + std::to_string(step++);
      File(d, n);
      live.insert(n);
    }
    for (int j = 0; j < 2 && !live.empty(); ++j) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      std::string n = *it;
      ASSERT_TRUE(store_->Unlink(d, n).ok());
      live.erase(n);
      stable.erase(n);
    }
  }
  for (const auto& n : stable) {
    EXPECT_TRUE(seen.count(n)) << n << " existed throughout but was missed";
  }
  for (const auto& n : seen) {
    if (n != "." && n != "..") {
      EXPECT_TRUE(n[0] == 'n' || n[0] == 'f') << n;
    }
  }
  // New entries appear after the ones that existed (monotonic cookies):
  // a listing that ran to the end saw every entry created during it.
  for (int i = 0; i < step; ++i) {
    std::string n = "n" + std::to_string(i);
    if (live.count(n)) {
      EXPECT_TRUE(seen.count(n)) << n;
    }
  }
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, ReadDirCookieSurvivesReopen) {
  uint64_t d = Dir(kRootInode, "d");
  for (int i = 0; i < 20; ++i) File(d, "f" + std::to_string(i));
  auto first = Must(store_->ReadDir(d, 0, 8));
  ASSERT_EQ(first.size(), 8u);
  Reopen();
  File(d, "late");
  auto rest = ReadAll(*store_, d);
  std::vector<DirEntry> tail;
  uint64_t cookie = first.back().cookie;
  for (int guard = 0; guard < 100; ++guard) {
    auto p = Must(store_->ReadDir(d, cookie, 5));
    if (p.empty()) break;
    for (auto& e : p) tail.push_back(e);
    cookie = p.back().cookie;
  }
  EXPECT_EQ(first.size() + tail.size(), rest.size());
  EXPECT_EQ(tail.back().name, "late");
}

// --- rename
// -------------------------------------------------------------------

TEST_P(MetaStoreTest, RenameFileSameAndCrossDir) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t b = Dir(kRootInode, "b");
  uint64_t f = File(a, "f");
  uint64_t replaced = 77;
  ASSERT_TRUE(store_->Rename(a, "f", a, "g", 0, &replaced).ok());
  EXPECT_EQ(replaced, 0u);
  EXPECT_EQ(Names(a), (std::set<std::string>{".", "..", "g"}));
  ASSERT_TRUE(store_->Rename(a, "g", b, "h", 0, &replaced).ok());
  EXPECT_EQ(Must(store_->Lookup(b, "h")).ino, f);
  EXPECT_EQ(Err(store_->Lookup(a, "g")), ENOENT);
  EXPECT_EQ(Attr(a).nlink, 2u);
  EXPECT_EQ(Attr(b).nlink, 2u);
  // Replace a file: the old one is orphaned and reported.
  uint64_t t = File(a, "t");
  ASSERT_TRUE(store_->Rename(b, "h", a, "t", 0, &replaced).ok());
  EXPECT_EQ(replaced, t);
  EXPECT_EQ(Must(store_->Lookup(a, "t")).ino, f);
  EXPECT_EQ(Attr(t).nlink, 0u);
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{t});
  // Replacing one of two links keeps the target alive.
  uint64_t u = File(a, "u");
  Must(store_->Link(u, b, "u2"));
  ASSERT_TRUE(store_->Rename(a, "t", a, "u", 0, &replaced).ok());
  EXPECT_EQ(replaced, u);
  EXPECT_EQ(Attr(u).nlink, 1u);
  EXPECT_EQ(Must(store_->ListOrphans()).size(), 1u);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, RenameDirectoryUpdatesDotDotAndNlink) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t b = Dir(kRootInode, "b");
  uint64_t d = Dir(a, "d");
  File(d, "inside");
  EXPECT_EQ(Attr(a).nlink, 3u);
  ASSERT_TRUE(store_->Rename(a, "d", b, "d", 0, nullptr).ok());
  EXPECT_EQ(Attr(a).nlink, 2u);
  EXPECT_EQ(Attr(b).nlink, 3u);
  EXPECT_EQ(Must(store_->Lookup(d, "..")).ino, b);
  auto dd = Must(store_->ReadDir(d, 0, 2));
  EXPECT_EQ(dd[1].ino, b);
  // Replace an empty directory.
  uint64_t e = Dir(a, "e");
  uint64_t replaced = 0;
  ASSERT_TRUE(store_->Rename(b, "d", a, "e", 0, &replaced).ok());
  EXPECT_EQ(replaced, e);
  EXPECT_EQ(Attr(e).nlink, 0u);  // orphaned like an rmdir'ed directory
  EXPECT_EQ(Must(store_->ListOrphans()), std::vector<uint64_t>{e});
  EXPECT_EQ(Attr(a).nlink, 3u);
  EXPECT_EQ(Attr(b).nlink, 2u);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, RenameErrors) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t sub = Dir(a, "sub");
  uint64_t deep = Dir(sub, "deep");
  uint64_t f = File(kRootInode, "f");
  Dir(kRootInode, "full");
  File(Must(store_->Lookup(kRootInode, "full")).ino, "x");
  Dir(kRootInode, "empty");
  uint64_t r = 0;
  EXPECT_EQ(Err(store_->Rename(kRootInode, "nope", kRootInode, "x", 0, &r)),
            ENOENT);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", 999, "x", 0, &r)), ENOENT);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", f, "x", 0, &r)), ENOTDIR);
  // Into its own subtree.
  EXPECT_EQ(Err(store_->Rename(kRootInode, "a", a, "x", 0, &r)), EINVAL);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "a", deep, "x", 0, &r)), EINVAL);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "a", deep, "x", 2, &r)), ENOENT);
  // Type mismatches and non-empty targets.
  EXPECT_EQ(Err(store_->Rename(kRootInode, "a", kRootInode, "f", 0, &r)),
            ENOTDIR);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "empty", 0, &r)),
            EISDIR);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "a", kRootInode, "full", 0, &r)),
            ENOTEMPTY);
  // A target that is an ancestor of the source is never empty.
  EXPECT_EQ(Err(store_->Rename(sub, "deep", kRootInode, "a", 0, &r)),
            ENOTEMPTY);
  // Flags.
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "a", 1, &r)),
            EEXIST);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "zz", 2, &r)),
            ENOENT);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "zz", 3, &r)),
            EINVAL);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "zz", 6, &r)),
            EINVAL);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "zz", 8, &r)),
            EINVAL);
  // Exchange that would put a directory under itself.
  EXPECT_EQ(Err(store_->Rename(sub, "deep", kRootInode, "a", 2, &r)), EINVAL);
  // Names.
  EXPECT_EQ(Err(store_->Rename(kRootInode, ".", kRootInode, "x", 0, &r)),
            EBUSY);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "..", 0, &r)),
            EBUSY);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode,
                               std::string(256, 'x'), 0, &r)),
            ENAMETOOLONG);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "", 0, &r)),
            EINVAL);
  // Nothing changed.
  EXPECT_EQ(Must(store_->Lookup(sub, "deep")).ino, deep);
  EXPECT_EQ(Must(store_->Lookup(kRootInode, "f")).ino, f);
  auto c = CheckInvariants(*store_);
  EXPECT_EQ(c.dirs, 6u);
}

TEST_P(MetaStoreTest, RenameOntoItselfOrHardLinkIsNoop) {
  uint64_t f = File(kRootInode, "f");
  Must(store_->Link(f, kRootInode, "g"));
  auto before = Attr(f);
  uint64_t r = 5;
  ASSERT_TRUE(store_->Rename(kRootInode, "f", kRootInode, "f", 0, &r).ok());
  EXPECT_EQ(r, 0u);
  ASSERT_TRUE(store_->Rename(kRootInode, "f", kRootInode, "g", 0, &r).ok());
  ASSERT_TRUE(store_->Rename(kRootInode, "f", kRootInode, "g", 2, &r).ok());
  EXPECT_EQ(Names(kRootInode), (std::set<std::string>{".", "..", "f", "g"}));
  EXPECT_EQ(Attr(f), before);
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", kRootInode, "f", 1, &r)),
            EEXIST);
  uint64_t d = Dir(kRootInode, "d");
  ASSERT_TRUE(store_->Rename(kRootInode, "d", kRootInode, "d", 0, &r).ok());
  EXPECT_EQ(Must(store_->Lookup(kRootInode, "d")).ino, d);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, RenameWhiteoutLeavesACharDeviceZeroZero) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t f = File(kRootInode, "f");
  uint64_t old_target = File(a, "g");
  uint64_t r = 0;
  ASSERT_TRUE(store_->Rename(kRootInode, "f", a, "g", 4, &r).ok());
  EXPECT_EQ(r, old_target);
  EXPECT_EQ(Must(store_->Lookup(a, "g")).ino, f);
  auto w = Must(store_->Lookup(kRootInode, "f"));
  EXPECT_NE(w.ino, f);
  EXPECT_EQ(w.mode, static_cast<uint32_t>(S_IFCHR));
  EXPECT_EQ(w.rdev, 0u);
  EXPECT_EQ(w.nlink, 1u);
  EXPECT_EQ(w.uid, 1u);  // owned like the moved file
  // With NOREPLACE: EEXIST when the target exists, nothing changes.
  EXPECT_EQ(Err(store_->Rename(kRootInode, "f", a, "g", 5, &r)), EEXIST);
  uint64_t d = Dir(a, "d");
  ASSERT_TRUE(store_->Rename(a, "d", kRootInode, "d", 5, &r).ok());
  EXPECT_EQ(Must(store_->Lookup(kRootInode, "d")).ino, d);
  EXPECT_TRUE(S_ISCHR(Must(store_->Lookup(a, "d")).mode));
  EXPECT_EQ(Attr(a).nlink, 2u);  // the directory left, the whiteout is no dir
  Reopen();
  EXPECT_TRUE(S_ISCHR(Must(store_->Lookup(kRootInode, "f")).mode));
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, RenameExchange) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t b = Dir(kRootInode, "b");
  uint64_t da = Dir(a, "x");   // directory
  uint64_t fb = File(b, "y");  // file
  auto cookie_x = ReadAll(*store_, a).back().cookie;
  uint64_t r = 9;
  ASSERT_TRUE(store_->Rename(a, "x", b, "y", 2, &r).ok());
  EXPECT_EQ(r, 0u);
  EXPECT_EQ(Must(store_->Lookup(a, "x")).ino, fb);
  EXPECT_EQ(Must(store_->Lookup(b, "y")).ino, da);
  EXPECT_EQ(Must(store_->Lookup(da, "..")).ino, b);
  EXPECT_EQ(Attr(a).nlink, 2u);
  EXPECT_EQ(Attr(b).nlink, 3u);
  EXPECT_EQ(Attr(fb).nlink, 1u);
  // Names keep their cookies.
  EXPECT_EQ(ReadAll(*store_, a).back().cookie, cookie_x);
  // Exchange two directories across parents, and two files in one dir.
  uint64_t db = Dir(a, "z");
  ASSERT_TRUE(store_->Rename(a, "z", b, "y", 2, &r).ok());
  EXPECT_EQ(Must(store_->Lookup(db, "..")).ino, b);
  EXPECT_EQ(Must(store_->Lookup(da, "..")).ino, a);
  EXPECT_EQ(Attr(a).nlink, 3u);
  EXPECT_EQ(Attr(b).nlink, 3u);
  uint64_t p = File(a, "p");
  uint64_t q = File(a, "q");
  ASSERT_TRUE(store_->Rename(a, "p", a, "q", 2, &r).ok());
  EXPECT_EQ(Must(store_->Lookup(a, "p")).ino, q);
  EXPECT_EQ(Must(store_->Lookup(a, "q")).ino, p);
  CheckInvariants(*store_);
}

// The full matrix: source kind x target kind x flags x same/other directory.
TEST_P(MetaStoreTest, RenameMatrix) {
  enum Kind { kNone, kFile, kEmptyDir, kFullDir, kSymlink };
  const char* kind_names[] = {"none", "file", "emptydir", "fulldir", "symlink"};
  auto is_dir = [](Kind k) { return k == kEmptyDir || k == kFullDir; };
  int n = 0;
  for (Kind src : {kFile, kEmptyDir, kFullDir, kSymlink}) {
    for (Kind dst : {kNone, kFile, kEmptyDir, kFullDir, kSymlink}) {
      for (uint32_t flags : {0u, 1u, 2u}) {
        for (bool same_dir : {true, false}) {
          SCOPED_TRACE(std::string(kind_names[src]) + " -> " + kind_names[dst] +
                       " flags " + std::to_string(flags) +
                       (same_dir ? " same dir" : " other dir"));
          std::string tag = std::to_string(n++);
          uint64_t p1 = Dir(kRootInode, "p" + tag);
          uint64_t p2 = same_dir ? p1 : Dir(kRootInode, "q" + tag);
          auto make = [&](uint64_t parent, const std::string& name, Kind k) {
            uint64_t ino = 0;
            if (k == kFile) ino = File(parent, name);
            if (k == kSymlink) {
              ino = Must(store_->Symlink(parent, name, "t", 0, 0)).ino;
            }
            if (is_dir(k)) ino = Dir(parent, name);
            if (k == kFullDir) File(ino, "child");
            return ino;
          };
          uint64_t s = make(p1, "s", src);
          uint64_t t = make(p2, "t", dst);
          // Expected outcome by the rules of rename(2)/renameat2(2).
          int want = 0;
          if (flags == 2) {
            if (dst == kNone) want = ENOENT;
          } else if (dst != kNone) {
            if (flags == 1) {
              want = EEXIST;
            } else if (is_dir(src) && !is_dir(dst)) {
              want = ENOTDIR;
            } else if (!is_dir(src) && is_dir(dst)) {
              want = EISDIR;
            } else if (dst == kFullDir) {
              want = ENOTEMPTY;
            }
          }
          uint64_t replaced = 123;
          Status st = store_->Rename(p1, "s", p2, "t", flags, &replaced);
          EXPECT_EQ(st.code(), want) << st.ToString();
          if (want != 0) {
            EXPECT_EQ(Must(store_->Lookup(p1, "s")).ino, s);
            if (dst != kNone) {
              EXPECT_EQ(Must(store_->Lookup(p2, "t")).ino, t);
            }
            continue;
          }
          EXPECT_EQ(Must(store_->Lookup(p2, "t")).ino, s);
          if (flags == 2) {
            EXPECT_EQ(Must(store_->Lookup(p1, "s")).ino, t);
            EXPECT_EQ(replaced, 0u);
          } else {
            EXPECT_EQ(Err(store_->Lookup(p1, "s")), ENOENT);
            EXPECT_EQ(replaced, dst == kNone ? 0u : t);
            if (dst != kNone && !is_dir(dst)) {
              EXPECT_EQ(Attr(t).nlink, 0u);
              std::vector<ObsoleteStripe> ob;
              EXPECT_TRUE(store_->PurgeInode(t, &ob).ok());
            }
          }
        }
      }
    }
  }
  CheckInvariants(*store_);
}

// --- xattrs
// ---------------------------------------------------------------------

TEST_P(MetaStoreTest, Xattrs) {
  uint64_t f = File(kRootInode, "f");
  SetAttrRequest back;  // ctime far back first: SetXattr must move it
  back.mask = kSetCtime;
  back.ctime = {10, 0};
  Must(store_->SetAttr(f, back, nullptr));
  EXPECT_EQ(Err(store_->GetXattr(f, "user.a")), ENODATA);
  ASSERT_TRUE(store_->SetXattr(f, "user.a", "one", 0).ok());
  EXPECT_EQ(Must(store_->GetXattr(f, "user.a")), "one");
  EXPECT_GT(Attr(f).ctime.sec, 10);
  EXPECT_EQ(store_->SetXattr(f, "user.a", "x", 1).code(), EEXIST);
  EXPECT_EQ(store_->SetXattr(f, "user.b", "x", 2).code(), ENODATA);
  ASSERT_TRUE(store_->SetXattr(f, "user.a", "two", 2).ok());
  ASSERT_TRUE(
      store_->SetXattr(f, "user.b", std::string("\0bin\xff", 5), 1).ok());
  ASSERT_TRUE(store_->SetXattr(f, "trusted.empty", "", 0).ok());
  EXPECT_EQ(Must(store_->GetXattr(f, "user.b")), std::string("\0bin\xff", 5));
  EXPECT_EQ(Must(store_->GetXattr(f, "trusted.empty")), "");
  EXPECT_EQ(Must(store_->ListXattr(f)),
            (std::vector<std::string>{"trusted.empty", "user.a", "user.b"}));
  EXPECT_EQ(store_->SetXattr(f, "", "x", 0).code(), ERANGE);
  EXPECT_EQ(store_->SetXattr(f, std::string(256, 'n'), "x", 0).code(), ERANGE);
  EXPECT_EQ(store_->SetXattr(f, "user.big", std::string(65537, 'v'), 0).code(),
            E2BIG);
  EXPECT_TRUE(store_->SetXattr(f, "user.max", std::string(65536, 'v'), 0).ok());
  EXPECT_EQ(store_->SetXattr(f, "user.a", "x", 3).code(), EINVAL);
  EXPECT_EQ(store_->SetXattr(999, "user.a", "x", 0).code(), ENOENT);
  EXPECT_EQ(Err(store_->GetXattr(999, "user.a")), ENOENT);
  EXPECT_EQ(Err(store_->ListXattr(999)), ENOENT);
  EXPECT_EQ(store_->RemoveXattr(f, "user.zzz").code(), ENODATA);
  EXPECT_EQ(store_->RemoveXattr(999, "user.a").code(), ENOENT);
  ASSERT_TRUE(store_->RemoveXattr(f, "user.a").ok());
  EXPECT_EQ(Err(store_->GetXattr(f, "user.a")), ENODATA);
  // Xattrs of one inode never leak into a neighbour's listing.
  uint64_t g = File(kRootInode, "g");
  EXPECT_TRUE(Must(store_->ListXattr(g)).empty());
  ASSERT_TRUE(store_->SetXattr(kRootInode, "user.root", "r", 0).ok());
  Reopen();
  EXPECT_EQ(Must(store_->ListXattr(f)).size(), 3u);
  EXPECT_EQ(Must(store_->GetXattr(kRootInode, "user.root")), "r");
}

// --- stripe map
// -----------------------------------------------------------------

TEST_P(MetaStoreTest, AllocateVersionsNeverReused) {
  uint64_t a = Must(store_->AllocateVersions(10));
  EXPECT_GE(a, 1u);
  uint64_t b = Must(store_->AllocateVersions(1));
  EXPECT_EQ(b, a + 10);
  EXPECT_EQ(Err(store_->AllocateVersions(0)), EINVAL);
  uint64_t big = Must(store_->AllocateVersions(100000));  // past one batch
  EXPECT_EQ(big, b + 1);
  Reopen();
  uint64_t c = Must(store_->AllocateVersions(1));
  EXPECT_GE(c, big + 100000);
}

TEST_P(MetaStoreTest, CommitStripeCasRules) {
  const uint64_t S = geo_.stripe_size();
  uint64_t f = File(kRootInode, "f");
  uint64_t v1 = Must(store_->AllocateVersions(3));
  ObsoleteStripe ob{1, 2, 3};
  ASSERT_TRUE(store_->CommitStripe(f, {2, v1, 0}, 0, 2 * S + 10, &ob).ok());
  EXPECT_EQ(ob.inode, f);
  EXPECT_EQ(ob.stripe, 2u);
  EXPECT_EQ(ob.version, 0u);
  auto a1 = Attr(f);
  EXPECT_EQ(a1.size, 2 * S + 10);
  // Stale expectation: ESTALE, nothing changes.
  Status st = store_->CommitStripe(f, {2, v1 + 1, 0}, 0, 3 * S, &ob);
  EXPECT_EQ(st.code(), ESTALE);
  EXPECT_NE(st.message().find("version"), std::string::npos);
  EXPECT_EQ(Attr(f), a1);
  EXPECT_EQ(Must(store_->GetStripes(f, 2, 1))[0].version, v1);
  // Correct expectation replaces and reports the old version; smaller size
  // never shrinks the file.
  ASSERT_TRUE(
      store_->CommitStripe(f, {2, v1 + 1, 0b100000, 8192}, v1, 5, &ob).ok());
  EXPECT_EQ(ob.version, v1);
  auto sv = Must(store_->GetStripes(f, 0, 10));
  ASSERT_EQ(sv.size(), 1u);
  EXPECT_EQ(sv[0], (StripeVersion{2, v1 + 1, 0b100000, 8192}));
  // Repair keeps the chunk length.
  ASSERT_TRUE(store_->SetStripeMissing(f, 2, v1 + 1, 0).ok());
  EXPECT_EQ(Must(store_->GetStripes(f, 2, 1))[0],
            (StripeVersion{2, v1 + 1, 0, 8192}));
  EXPECT_EQ(
      store_->CommitStripe(f, {0, v1 + 2, 0, geo_.cell_size + 1}, 0, 0, &ob)
          .code(),
      EINVAL);  // chunk longer than a cell
  EXPECT_EQ(Attr(f).size, 2 * S + 10);
  // Invalid arguments.
  EXPECT_EQ(store_->CommitStripe(f, {0, 0, 0}, 0, 0, &ob).code(), EINVAL);
  EXPECT_EQ(store_->CommitStripe(f, {2, v1 + 1, 0}, v1 + 1, 0, &ob).code(),
            EINVAL);
  EXPECT_EQ(store_->CommitStripe(f, {0, v1 + 1000000, 0}, 0, 0, &ob).code(),
            EINVAL);  // never allocated
  EXPECT_EQ(store_->CommitStripe(f, {0, v1 + 2, 1u << 6}, 0, 0, &ob).code(),
            EINVAL);  // bit past k+m
  EXPECT_EQ(store_->CommitStripe(f, {0, v1 + 2, 0b111}, 0, 0, &ob).code(),
            EINVAL);  // more than m missing
  EXPECT_EQ(store_->CommitStripe(f, {0, v1 + 2, 0}, 0, S + 1, &ob).code(),
            EINVAL);  // size past the stripe
  uint64_t d = Dir(kRootInode, "d");
  EXPECT_EQ(store_->CommitStripe(d, {0, v1 + 2, 0}, 0, 0, &ob).code(), EISDIR);
  EXPECT_EQ(store_->CommitStripe(999, {0, v1 + 2, 0}, 0, 0, &ob).code(),
            ENOENT);
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 10)).size(), 1u);
  // Commit to an orphan (open unlinked file) still works.
  ASSERT_TRUE(store_->Unlink(kRootInode, "f").ok());
  ASSERT_TRUE(store_->CommitStripe(f, {0, v1 + 2, 0}, 0, S, &ob).ok());
  EXPECT_EQ(Must(store_->StatFs()).bytes_used, 2 * S + 10);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, CommitStripesIsAllOrNothing) {
  const uint64_t S = geo_.stripe_size();
  uint64_t f = File(kRootInode, "f");
  uint64_t v = Must(store_->AllocateVersions(20));
  std::vector<ObsoleteStripe> ob;
  // Three stripes in one call, one durable change.
  const auto before = store_->commit_stats();
  ASSERT_TRUE(store_
                  ->CommitStripes(f,
                                  {{{0, v, 0, 4096}, 0},
                                   {{1, v + 1, 0, 4096}, 0},
                                   {{5, v + 2, 0b1, 4096}, 0}},
                                  5 * S + 7, &ob)
                  .ok());
  EXPECT_EQ(store_->commit_stats().mutations - before.mutations, 1u);
  ASSERT_EQ(ob.size(), 3u);
  for (const auto& o : ob) EXPECT_EQ(o.version, 0u);
  EXPECT_EQ(Attr(f).size, 5 * S + 7);
  auto sv = Must(store_->GetStripes(f, 0, 10));
  ASSERT_EQ(sv.size(), 3u);
  EXPECT_EQ(sv[2], (StripeVersion{5, v + 2, 0b1, 4096}));
  // One stale expectation: ESTALE naming it, and nothing changes.
  const auto a = Attr(f);
  Status st = store_->CommitStripes(
      f, {{{0, v + 3, 0, 4096}, v}, {{1, v + 4, 0, 4096}, v}}, 2 * S, &ob);
  EXPECT_EQ(st.code(), ESTALE);
  EXPECT_NE(st.message().find("stripe 1"), std::string::npos);
  EXPECT_EQ(Attr(f), a);
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 1))[0].version, v);
  // Right expectations: replaced versions come back in order.
  ASSERT_TRUE(store_
                  ->CommitStripes(f,
                                  {{{1, v + 5, 0, 4096}, v + 1},
                                   {{0, v + 6, 0, 4096}, v},
                                   {{2, v + 7, 0, 4096}, 0}},
                                  0, &ob)
                  .ok());
  ASSERT_EQ(ob.size(), 3u);
  EXPECT_EQ(ob[0], (ObsoleteStripe{f, 1, v + 1}));
  EXPECT_EQ(ob[1], (ObsoleteStripe{f, 0, v}));
  EXPECT_EQ(ob[2], (ObsoleteStripe{f, 2, 0}));
  EXPECT_EQ(Attr(f).size, 5 * S + 7);  // never shrinks
  // Invalid batches change nothing.
  EXPECT_EQ(store_->CommitStripes(f, {}, 0, &ob).code(), EINVAL);
  EXPECT_EQ(
      store_
          ->CommitStripes(
              f, {{{3, v + 8, 0, 4096}, 0}, {{3, v + 9, 0, 4096}, 0}}, 0, &ob)
          .code(),
      EINVAL);  // the same stripe twice
  EXPECT_EQ(store_
                ->CommitStripes(
                    f, {{{3, v + 8, 0, 4096}, 0}, {{4, v + 9, 0b111, 4096}, 0}},
                    0, &ob)
                .code(),
            EINVAL);  // more than m missing in one of them
  EXPECT_EQ(store_->CommitStripes(f, {{{3, v + 8, 0, 4096}, 0}}, 4 * S + 1, &ob)
                .code(),
            EINVAL);  // size past the last stripe
  std::vector<StripeCommit> huge(kMaxStripesPerCommit + 1);
  for (size_t i = 0; i < huge.size(); ++i) huge[i].sv = {i, v + 10, 0, 1};
  EXPECT_EQ(store_->CommitStripes(f, huge, 0, &ob).code(), EINVAL);
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 10)).size(), 4u);
  Reopen();
  EXPECT_EQ(Must(store_->GetStripes(f, 0, 10)).size(), 4u);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, CommitUpdatesTimesAndStats) {
  uint64_t f = File(kRootInode, "f");
  SetAttrRequest r;
  r.mask = kSetMtime | kSetCtime;
  r.mtime = {10, 0};
  r.ctime = {10, 0};
  Must(store_->SetAttr(f, r, nullptr));
  Commit(f, 0, 4096);
  auto a = Attr(f);
  EXPECT_GT(a.mtime.sec, 10);
  EXPECT_EQ(a.mtime, a.ctime);
  EXPECT_EQ(Must(store_->StatFs()).bytes_used, 4096u);
}

// The writeback cache's kernel owns a file's mtime and ctime: commits,
// size raises and punched holes of such a mount leave them as it set them
// (and an atime update moves no ctime); the size still grows.
TEST_P(MetaStoreTest, KeepTimesCallsLeaveMtimeAndCtime) {
  uint64_t f = File(kRootInode, "f");
  const uint64_t S = geo_.stripe_size();
  SetAttrRequest r;
  r.mask = kSetMtime | kSetCtime;
  r.mtime = {10, 5};
  r.ctime = {11, 7};
  Must(store_->SetAttr(f, r, nullptr));
  std::vector<ObsoleteStripe> ob;
  const uint64_t v = Must(store_->AllocateVersions(2));
  ASSERT_TRUE(store_
                  ->CommitStripesKeepTimes(
                      f, {{{0, v, 0, 4096}, 0}, {{1, v + 1, 0, 4096}, 0}},
                      S + 4096, &ob)
                  .ok());
  EXPECT_EQ(ob, (std::vector<ObsoleteStripe>{{f, 0, 0}, {f, 1, 0}}));
  auto a = Attr(f);
  EXPECT_EQ(a.size, S + 4096);
  EXPECT_EQ(a.mtime, (Timespec{10, 5}));
  EXPECT_EQ(a.ctime, (Timespec{11, 7}));

  SetAttrRequest grow;
  grow.mask = kSetSize | kSetSizeAtLeast | kKeepTimes;
  grow.size = 2 * S;
  EXPECT_EQ(Must(store_->SetAttr(f, grow, nullptr)).size, 2 * S);
  SetAttrRequest atime;
  atime.mask = kSetAtime | kKeepTimes;
  atime.atime = {20, 1};
  a = Must(store_->SetAttr(f, atime, nullptr));
  EXPECT_EQ(a.atime, (Timespec{20, 1}));
  ob.clear();
  ASSERT_TRUE(store_->DropStripesKeepTimes(f, 1, 1, &ob).ok());
  EXPECT_EQ(ob, (std::vector<ObsoleteStripe>{{f, 1, v + 1}}));
  Reopen();
  a = Attr(f);
  EXPECT_EQ(a.size, 2 * S);
  EXPECT_EQ(a.mtime, (Timespec{10, 5}));
  EXPECT_EQ(a.ctime, (Timespec{11, 7}));
  EXPECT_EQ(a.atime, (Timespec{20, 1}));

  // Without kKeepTimes changes stamp them, as before.
  grow.mask = kSetSize | kSetSizeAtLeast;
  Must(store_->SetAttr(f, grow, nullptr));  // no size change: ctime only
  EXPECT_EQ(Attr(f).mtime, (Timespec{10, 5}));
  EXPECT_GT(Attr(f).ctime.sec, 11);
  grow.size = 3 * S;
  EXPECT_GT(Must(store_->SetAttr(f, grow, nullptr)).mtime.sec, 10);
  CheckInvariants(*store_);
}

TEST_P(MetaStoreTest, GetStripesRangeAndHoles) {
  uint64_t f = File(kRootInode, "f");
  const uint64_t S = geo_.stripe_size();
  for (uint64_t i : {0, 3, 4, 9}) Commit(f, i, (i + 1) * S);
  auto get = [&](uint64_t first, uint64_t count) {
    std::vector<uint64_t> idx;
    for (auto& sv : Must(store_->GetStripes(f, first, count))) {
      idx.push_back(sv.stripe);
    }
    return idx;
  };
  EXPECT_EQ(get(0, 10), std::vector<uint64_t>({0, 3, 4, 9}));
  EXPECT_EQ(get(1, 3), std::vector<uint64_t>({3}));
  EXPECT_EQ(get(4, 1), std::vector<uint64_t>({4}));
  EXPECT_EQ(get(5, 4), std::vector<uint64_t>());
  EXPECT_EQ(get(0, 0), std::vector<uint64_t>());
  EXPECT_EQ(get(4, UINT64_MAX), std::vector<uint64_t>({4, 9}));
  EXPECT_EQ(Err(store_->GetStripes(999, 0, 1)), ENOENT);
}

TEST_P(MetaStoreTest, SetStripeMissing) {
  uint64_t f = File(kRootInode, "f");
  uint64_t v = Commit(f, 1, 100);
  EXPECT_EQ(store_->SetStripeMissing(f, 1, v, 0b11).code(), 0);
  EXPECT_EQ(Must(store_->GetStripes(f, 1, 1))[0].missing_mask, 0b11u);
  EXPECT_EQ(store_->SetStripeMissing(f, 1, v + 1, 0).code(), ESTALE);
  EXPECT_EQ(store_->SetStripeMissing(f, 7, v, 0).code(), ESTALE);
  EXPECT_EQ(store_->SetStripeMissing(f, 1, v, 1u << 6).code(), EINVAL);
  ASSERT_TRUE(store_->SetStripeMissing(f, 1, v, 0).ok());
  Reopen();
  EXPECT_EQ(Must(store_->GetStripes(f, 1, 1))[0], (StripeVersion{1, v, 0}));
}

TEST_P(MetaStoreTest, ListStripesCursor) {
  std::vector<StripeRef> want;
  for (int i = 0; i < 5; ++i) {
    uint64_t f = File(kRootInode, "f" + std::to_string(i));
    for (uint64_t s : {0, 2, 5}) {
      uint64_t v = Commit(f, s, (s + 1) * geo_.stripe_size());
      want.push_back({f, {s, v, 0}});
    }
  }
  std::vector<StripeRef> got;
  uint64_t ai = 0, as = 0;
  for (int guard = 0; guard < 100; ++guard) {
    auto page = Must(store_->ListStripes(ai, as, 4));
    if (page.empty()) break;
    EXPECT_LE(page.size(), 4u);
    for (auto& r : page) got.push_back(r);
    ai = page.back().inode;
    as = page.back().sv.stripe;
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].inode, want[i].inode);
    EXPECT_EQ(got[i].sv, want[i].sv);
  }
  // Cursor at the last stripe of an inode moves on to the next inode.
  auto next = Must(store_->ListStripes(want[2].inode, UINT64_MAX, 1));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].inode, want[3].inode);
  EXPECT_TRUE(Must(store_->ListStripes(UINT64_MAX, UINT64_MAX, 10)).empty());
  EXPECT_TRUE(Must(store_->ListStripes(0, 0, 0)).empty());
}

// --- cluster map
// ----------------------------------------------------------------

TEST_P(MetaStoreTest, ClusterMap) {
  auto m = Must(store_->GetClusterMap());
  EXPECT_EQ(m.epoch, 0u);
  EXPECT_TRUE(m.servers.empty());
  // A new volume places by the balanced scheme (old ones decode as legacy).
  EXPECT_EQ(m.placement, PlacementScheme::kBalanced);
  EXPECT_EQ(m.placement_groups, kDefaultPlacementGroups);
  ServerInfo s3{3, "127.0.0.1:7003", "rack-b", ServerState::kUp};
  ServerInfo s1{1, "127.0.0.1:7001", "rack-a", ServerState::kUp};
  ASSERT_TRUE(store_->UpsertServer(s3).ok());
  ASSERT_TRUE(store_->UpsertServer(s1).ok());
  m = Must(store_->GetClusterMap());
  EXPECT_EQ(m.epoch, 2u);
  ASSERT_EQ(m.servers.size(), 2u);
  EXPECT_EQ(m.servers[0], s1);  // sorted by id
  EXPECT_EQ(m.servers[1], s3);
  s3.address = "127.0.0.1:8003";
  ASSERT_TRUE(store_->UpsertServer(s3).ok());
  ASSERT_TRUE(store_->SetServerState(1, ServerState::kOut).ok());
  m = Must(store_->GetClusterMap());
  EXPECT_EQ(m.epoch, 4u);
  EXPECT_EQ(m.servers[1].address, "127.0.0.1:8003");
  EXPECT_EQ(m.servers[0].state, ServerState::kOut);
  // Setting the same state is not a change.
  ASSERT_TRUE(store_->SetServerState(1, ServerState::kOut).ok());
  EXPECT_EQ(Must(store_->GetClusterMap()).epoch, 4u);
  EXPECT_EQ(store_->SetServerState(9, ServerState::kDown).code(), ENOENT);
  EXPECT_EQ(store_->SetServerState(1, static_cast<ServerState>(7)).code(),
            EINVAL);
  EXPECT_EQ(store_->UpsertServer({5, std::string(5000, 'a'), "", {}}).code(),
            EINVAL);
  ServerInfo heavy{6, "127.0.0.1:7006", "", ServerState::kUp};
  heavy.weight = kMaxServerWeight + 1;
  EXPECT_EQ(store_->UpsertServer(heavy).code(), EINVAL);
  Reopen();
  auto after = Must(store_->GetClusterMap());
  EXPECT_EQ(after.epoch, 4u);
  EXPECT_EQ(after.placement, PlacementScheme::kBalanced);
  EXPECT_EQ(after.servers, m.servers);
}

// --- persistence
// ----------------------------------------------------------------

TEST_P(MetaStoreTest, ReopenGivesIdenticalState) {
  uint64_t a = Dir(kRootInode, "a");
  uint64_t f = File(a, "f");
  Must(store_->Link(f, kRootInode, "f2"));
  Must(store_->Symlink(a, "l", "f", 0, 0));
  Commit(f, 0, 1234);
  Commit(f, 3, 3 * geo_.stripe_size() + 1);
  ASSERT_TRUE(store_->SetXattr(f, "user.k", "v", 0).ok());
  File(a, "gone");
  ASSERT_TRUE(store_->Unlink(a, "gone").ok());
  ASSERT_TRUE(store_->UpsertServer({1, "x", "d", ServerState::kDown}).ok());

  auto snapshot = [&]() {
    std::vector<std::string> s;
    std::vector<std::pair<uint64_t, std::string>> todo{{kRootInode, "/"}};
    while (!todo.empty()) {
      auto [dir, path] = todo.back();
      todo.pop_back();
      for (auto& e : ReadAll(*store_, dir)) {
        auto at = Must(store_->GetAttr(e.ino));
        std::string line = path + e.name + " ino=" + std::to_string(e.ino) +
                           " cookie=" + std::to_string(e.cookie) +
                           " mode=" + std::to_string(at.mode) +
                           " nlink=" + std::to_string(at.nlink) +
                           " size=" + std::to_string(at.size) +
                           " mtime=" + std::to_string(at.mtime.sec) + "." +
                           std::to_string(at.mtime.nsec) +
                           " ctime=" + std::to_string(at.ctime.sec) + "." +
                           std::to_string(at.ctime.nsec);
        for (auto& x : Must(store_->ListXattr(e.ino))) {
          line += " x:" + x + "=" + Must(store_->GetXattr(e.ino, x));
        }
        s.push_back(line);
        if (S_ISDIR(at.mode) && e.name != "." && e.name != "..") {
          todo.push_back({e.ino, path + e.name + "/"});
        }
      }
    }
    for (auto& r : Must(store_->ListStripes(0, 0, 1000))) {
      s.push_back("stripe " + std::to_string(r.inode) + "/" +
                  std::to_string(r.sv.stripe) + " v" +
                  std::to_string(r.sv.version));
    }
    for (uint64_t o : Must(store_->ListOrphans())) {
      s.push_back("orphan " + std::to_string(o));
    }
    auto st = Must(store_->StatFs());
    s.push_back("stats " + std::to_string(st.inodes) + " " +
                std::to_string(st.bytes_used));
    auto m = Must(store_->GetClusterMap());
    s.push_back("epoch " + std::to_string(m.epoch) + " servers " +
                std::to_string(m.servers.size()));
    return s;
  };
  auto before = snapshot();
  Reopen();
  EXPECT_EQ(snapshot(), before);
  // New inodes after reopen get fresh numbers.
  uint64_t g = File(kRootInode, "new");
  EXPECT_GT(g, f);
  CheckInvariants(*store_);
}

// --- schema decoders
// --------------------------------------------------------------

TEST(MetaSchema, DecodersRejectMalformedInput) {
  using namespace meta_schema;  // NOLINT
  meta_schema::InodeRecord rec;
  rec.attr.ino = 5;
  rec.attr.mtime = {7, 8};
  rec.next_seq = 9;
  std::string enc = EncodeInode(rec);
  auto dec = DecodeInode(enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(dec->attr, rec.attr);
  EXPECT_EQ(dec->next_seq, 9u);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeInode(enc.substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeInode(enc + "x").ok());
  std::string bad = enc;
  bad[0] = 99;
  EXPECT_FALSE(DecodeInode(bad).ok());
  ClusterMap m{3, {{1, "a", "b", ServerState::kDown}}};
  std::string cm = EncodeClusterMap(m);
  auto dm = DecodeClusterMap(cm);
  ASSERT_TRUE(dm.ok());
  EXPECT_EQ(dm->servers, m.servers);
  for (size_t n = 0; n < cm.size(); ++n) {
    EXPECT_FALSE(DecodeClusterMap(cm.substr(0, n)).ok()) << n;
  }
  // A legacy map with default weights keeps the layout from before
  // placement schemes (no trailer) and decodes as kLegacy; a balanced map
  // round-trips its scheme, group count and weights.
  EXPECT_EQ(cm.size(), 8u + 4 + 4 + 4 + 1 + 4 + 1 + 1);
  EXPECT_EQ(dm->placement, PlacementScheme::kLegacy);
  ClusterMap bal = m;
  bal.placement = PlacementScheme::kBalanced;
  bal.placement_groups = 1u << 14;
  bal.servers[0].weight = 250;
  std::string bm = EncodeClusterMap(bal);
  auto db = DecodeClusterMap(bm);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db->placement, PlacementScheme::kBalanced);
  EXPECT_EQ(db->placement_groups, 1u << 14);
  EXPECT_EQ(db->servers, bal.servers);
  for (size_t n = cm.size() + 1; n < bm.size(); ++n) {
    EXPECT_FALSE(DecodeClusterMap(bm.substr(0, n)).ok()) << n;
  }
  bal.placement_groups = 0;
  EXPECT_FALSE(DecodeClusterMap(EncodeClusterMap(bal)).ok());
  // A legacy map with default weights and a trailer anyway is not a record
  // the encoder writes (it would not round-trip): refused. The fuzzer's
  // find: epoch, no servers, scheme 0, 0 groups.
  std::string needless = cm;
  needless += std::string(1, '\0') + std::string(4, '\0');  // legacy, groups
  needless += std::string("\x64\0\0\0", 4);                 // weight 100
  EXPECT_FALSE(DecodeClusterMap(needless).ok());
  const std::string fuzzed("\x03\0\0\0\0\x02\0\0\0\0\0\0\0\0\0\0\0", 17);
  if (auto f = DecodeClusterMap(fuzzed); f.ok()) {
    EXPECT_EQ(EncodeClusterMap(*f), fuzzed);
  }
  EXPECT_EQ(DecodeGeometry(EncodeGeometry({0, 1, 4096})).status().code(),
            EBADMSG);
  EXPECT_FALSE(DecodeDentry("short").ok());
  EXPECT_FALSE(ParseStripe("S123", EncodeStripeValue(1, 0, 4096)).ok());
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
}

// The leader lease has one holder at a time; it passes on only when it
// expires.
TEST_P(MetaStoreTest, LeaderLeaseHasOneHolder) {
  using std::chrono::milliseconds;
  EXPECT_TRUE(Must(store_->HoldLeadership("a", milliseconds(60000))));
  EXPECT_FALSE(Must(store_->HoldLeadership("b", milliseconds(60000))));
  EXPECT_TRUE(Must(store_->HoldLeadership("a", milliseconds(1))));  // renew
  std::this_thread::sleep_for(milliseconds(20));  // let it expire
  EXPECT_TRUE(Must(store_->HoldLeadership("b", milliseconds(60000))));
  EXPECT_FALSE(Must(store_->HoldLeadership("a", milliseconds(60000))));
  EXPECT_EQ(Err(store_->HoldLeadership("", milliseconds(1))), EINVAL);
}

INSTANTIATE_TEST_SUITE_P(RocksDb, MetaStoreTest,
                         ::testing::Values(Engine::kRocksDb));
INSTANTIATE_TEST_SUITE_P(Etcd, MetaStoreTest, ::testing::Values(Engine::kEtcd));

}  // namespace
}  // namespace stripefs
