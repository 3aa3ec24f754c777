// Metadata calls per create and per unlink (issue #13, bench write row f):
// StripeFs driven directly, as the kernel drives it, over an in-process
// volume whose metadata service counts every call (CountingMetaService).
//
// The kernel sends, around a create: GETATTR of the parent (its attributes
// were invalidated by the previous change, and the permission check needs
// them), LOOKUP (negative), CREATE; around an unlink: UNLINK, the time flush
// SETATTR(mtime, ctime) of the victim, then GETATTR of the parent. The
// LOOKUP is the kernel's own question; the rest should cost one metadata
// call per create and one per unlink. An older metad (no CreateEntry /
// UnlinkEntry: EOPNOTSUPP) and a parent with a default ACL take the
// several-call path with the same results.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <memory>
#include <string>

#include "fs/posix_acl.h"
#include "fs/stripe_fs.h"
#include "tests/client/counting_meta_service.h"
#include "tests/support/fake_inflight.h"
#include "tests/support/in_process_volume.h"

namespace stripefs::fs {
namespace {

using namespace fuse_abi;  // NOLINT
using stripefs::testing::CountingMetaService;
using stripefs::testing::FakeInFlight;
using stripefs::testing::InProcessVolume;
using stripefs::testing::RecordedReply;

constexpr uint32_t kUid = 1000, kGid = 100;

class CreateCallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stripefs::testing::InProcessVolumeOptions o;
    o.wrap_meta = stripefs::testing::CountingWrapper(&counting_);
    auto v = InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    StripeFsOptions fo;
    fo.purge_orphans_at_start = false;
    fs_ = std::make_unique<StripeFs>(&vol_->volume(), fo);
    fuse::NegotiatedInit init;
    init.flags = FUSE_DONT_MASK;  // the umask is ours, as when mounted
    init.max_write = 1 << 20;
    fs_->Init(init);
  }
  void TearDown() override {
    fs_.reset();
    vol_.reset();
  }
  MetaService& meta() { return vol_->volume().meta(); }
  int Calls() { return counting_->calls.load(); }
  // Metadata calls the handler run by `op` made (it must reply `want`).
  template <typename Op>
  int CallsOf(Op op, int want = 0, std::string* body = nullptr) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    f.ctx.uid = kUid;
    f.ctx.gid = kGid;
    const int before = Calls();
    op(fuse::Replier(&f, nullptr));
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, want);
    if (body) *body = rec.body;
    return Calls() - before;
  }

  // CREATE (umask 077) then RELEASE; the new inode's attributes.
  fuse_attr Create(uint64_t parent, const std::string& name, int* calls) {
    fuse_create_in in{};
    in.flags = O_WRONLY | O_CREAT;
    in.mode = S_IFREG | 0666;
    in.umask = 077;
    std::string body;
    *calls = CallsOf(
        [&](fuse::Replier r) { fs_->Create(std::move(r), parent, name, in); },
        0, &body);
    fuse_entry_out e{};
    EXPECT_GE(body.size(), sizeof(e) + sizeof(fuse_open_out));
    if (body.size() >= sizeof(e)) std::memcpy(&e, body.data(), sizeof(e));
    fuse_open_out op{};
    if (body.size() >= sizeof(e) + sizeof(op))
      std::memcpy(&op, body.data() + sizeof(e), sizeof(op));
    fuse_release_in rel{};
    rel.fh = op.fh;
    CallsOf(
        [&](fuse::Replier r) { fs_->Release(std::move(r), e.nodeid, rel); });
    return e.attr;
  }
  fuse_attr Mkdir(uint64_t parent, const std::string& name, int* calls) {
    fuse_mkdir_in in{};
    in.mode = 0777;
    in.umask = 077;
    std::string body;
    *calls = CallsOf(
        [&](fuse::Replier r) { fs_->Mkdir(std::move(r), parent, name, in); }, 0,
        &body);
    fuse_entry_out e{};
    EXPECT_GE(body.size(), sizeof(e));
    if (body.size() >= sizeof(e)) std::memcpy(&e, body.data(), sizeof(e));
    return e.attr;
  }
  // GETATTR; its metadata calls, the attributes through *out.
  int GetAttr(uint64_t ino, fuse_attr_out* out) {
    std::string body;
    fuse_getattr_in in{};
    const int n =
        CallsOf([&](fuse::Replier r) { fs_->GetAttr(std::move(r), ino, in); },
                0, &body);
    EXPECT_EQ(body.size(), sizeof(*out));
    if (body.size() == sizeof(*out))
      std::memcpy(out, body.data(), sizeof(*out));
    return n;
  }
  // The kernel's time flush after an unlink (fuse_flush_times).
  int FlushTimes(uint64_t ino, fuse_attr_out* out) {
    fuse_setattr_in in{};
    in.valid = FATTR_MTIME | FATTR_CTIME;
    in.mtime = 1234;
    in.ctime = 5678;
    in.ctimensec = 9;
    return SetAttr(ino, in, out);
  }
  // SETATTR; its metadata calls, the reply's attributes through *out.
  int SetAttr(uint64_t ino, const fuse_setattr_in& in, fuse_attr_out* out) {
    std::string body;
    const int n =
        CallsOf([&](fuse::Replier r) { fs_->SetAttr(std::move(r), ino, in); },
                0, &body);
    EXPECT_EQ(body.size(), sizeof(*out));
    if (body.size() == sizeof(*out))
      std::memcpy(out, body.data(), sizeof(*out));
    return n;
  }
  int Unlink(uint64_t parent, const std::string& name) {
    return CallsOf(
        [&](fuse::Replier r) { fs_->Unlink(std::move(r), parent, name); });
  }
  int Rename(uint64_t from, const std::string& name, uint64_t to,
             const std::string& new_name, int want = 0) {
    return CallsOf(
        [&](fuse::Replier r) {
          fs_->Rename(std::move(r), from, name, to, new_name, 0);
        },
        want);
  }
  // LINK; its metadata calls, the entry's attributes through *out.
  int Link(uint64_t ino, uint64_t parent, const std::string& name,
           fuse_attr* out) {
    std::string body;
    const int n = CallsOf(
        [&](fuse::Replier r) { fs_->Link(std::move(r), ino, parent, name); }, 0,
        &body);
    fuse_entry_out e{};
    EXPECT_EQ(body.size(), sizeof(e));
    if (body.size() == sizeof(e)) std::memcpy(&e, body.data(), sizeof(e));
    *out = e.attr;
    return n;
  }
  // The kernel's time flush after a link, rename or unlink of a file it
  // has not written: its own mtime (the stored one) and a ctime of its
  // clock.
  int FlushOwnTimes(uint64_t ino, fuse_attr_out* out) {
    auto a = meta().GetAttr(ino);
    EXPECT_TRUE(a.ok());
    fuse_setattr_in in{};
    in.valid = FATTR_MTIME | FATTR_CTIME;
    in.mtime = static_cast<uint64_t>(a->mtime.sec);
    in.mtimensec = a->mtime.nsec;
    in.ctime = static_cast<uint64_t>(a->ctime.sec) + 7;  // a later clock
    return SetAttr(ino, in, out);
  }
  // The reply `got` is what metadata holds for its inode now.
  void ExpectStored(const fuse_attr& got, const char* what) {
    auto a = meta().GetAttr(got.ino);
    ASSERT_TRUE(a.ok()) << what;
    EXPECT_EQ(got.nlink, a->nlink) << what;
    EXPECT_EQ(got.mode, a->mode) << what;
    EXPECT_EQ(got.size, a->size) << what;
    EXPECT_EQ(got.mtime, static_cast<uint64_t>(a->mtime.sec)) << what;
    EXPECT_EQ(got.mtimensec, a->mtime.nsec) << what;
    EXPECT_EQ(got.ctime, static_cast<uint64_t>(a->ctime.sec)) << what;
    EXPECT_EQ(got.ctimensec, a->ctime.nsec) << what;
  }
  // The kernel's GETATTR of a directory after a change: no metadata call,
  // and exactly what metadata holds.
  void ExpectDirFromChange(uint64_t dir, const char* what) {
    fuse_attr_out p{};
    EXPECT_EQ(GetAttr(dir, &p), 0) << what;
    ExpectStored(p.attr, what);
  }
  uint64_t Dir(const std::string& name, uint32_t mode, uint32_t gid) {
    auto a = meta().Mkdir(kRootInode, name, mode, 0, gid);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->ino : 0;
  }

  CountingMetaService* counting_ = nullptr;
  std::unique_ptr<InProcessVolume> vol_;
  std::unique_ptr<StripeFs> fs_;
};

TEST_F(CreateCallsTest, OneMetadataCallPerCreateAndPerUnlink) {
  const uint64_t dir = Dir("d", 0755, 0);
  for (int i = 0; i < 5; ++i) {
    const std::string name = "f" + std::to_string(i);
    int calls = 0;
    const fuse_attr a = Create(dir, name, &calls);
    EXPECT_EQ(calls, 1) << "CREATE " << name;
    EXPECT_EQ(a.mode, S_IFREG | 0600u);  // umask applied here
    EXPECT_EQ(a.uid, kUid);
    EXPECT_EQ(a.gid, kGid);
    // The kernel's next GETATTR of the directory: from the create.
    fuse_attr_out p{};
    EXPECT_EQ(GetAttr(dir, &p), 0);
    auto fresh = meta().GetAttr(dir);
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(p.attr.mtime, static_cast<uint64_t>(fresh->mtime.sec));
    EXPECT_EQ(p.attr.mtimensec, fresh->mtime.nsec);
    EXPECT_EQ(p.attr.nlink, fresh->nlink);
    EXPECT_LE(p.attr_valid, 1u);  // what is left of the 1 s timeout
    // Served once: another GETATTR asks the metadata service.
    EXPECT_EQ(GetAttr(dir, &p), 1);

    EXPECT_EQ(Unlink(dir, name), 1) << "UNLINK " << name;
    fuse_attr_out t{};
    EXPECT_EQ(FlushTimes(a.ino, &t), 0);
    EXPECT_EQ(t.attr.ino, a.ino);
    EXPECT_EQ(t.attr.nlink, 0u);
    EXPECT_EQ(t.attr.mtime, 1234u);  // the times the kernel sent
    EXPECT_EQ(t.attr.ctime, 5678u);
    EXPECT_EQ(t.attr.ctimensec, 9u);
    EXPECT_EQ(GetAttr(dir, &p), 0);
    fresh = meta().GetAttr(dir);
    ASSERT_TRUE(fresh.ok());
    EXPECT_EQ(p.attr.ctime, static_cast<uint64_t>(fresh->ctime.sec));
    EXPECT_EQ(p.attr.ctimensec, fresh->ctime.nsec);
  }
  const FsCounters& c = fs_->counters();
  EXPECT_EQ(c.dir_attrs_from_changes.load(), 10u);
  EXPECT_EQ(c.unlink_times_folded.load(), 5u);
  EXPECT_EQ(c.create_fallbacks.load(), 0u);
}

// The entry timeout (how long the kernel resolves a name without LOOKUP)
// is its own option: 1 s by default like the attribute timeout, and given
// to CREATE and LOOKUP replies as set, while attributes keep theirs.
TEST_F(CreateCallsTest, EntryTimeoutIsItsOwnOption) {
  const uint64_t dir = Dir("d", 0755, 0);
  auto entry_of = [&](const std::string& name) {
    std::string body;
    CallsOf([&](fuse::Replier r) { fs_->Lookup(std::move(r), dir, name); }, 0,
            &body);
    fuse_entry_out e{};
    EXPECT_EQ(body.size(), sizeof(e));
    if (body.size() == sizeof(e)) std::memcpy(&e, body.data(), sizeof(e));
    return e;
  };
  int calls = 0;
  Create(dir, "f", &calls);
  fuse_entry_out e = entry_of("f");
  EXPECT_EQ(e.entry_valid, 1u);
  EXPECT_EQ(e.entry_valid_nsec, 0u);
  EXPECT_EQ(e.attr_valid, 1u);

  fs_.reset();
  StripeFsOptions fo;
  fo.purge_orphans_at_start = false;
  fo.entry_timeout = std::chrono::milliseconds(30500);
  fs_ = std::make_unique<StripeFs>(&vol_->volume(), fo);
  fuse::NegotiatedInit init;
  init.flags = FUSE_DONT_MASK;
  init.max_write = 1 << 20;
  fs_->Init(init);
  e = entry_of("f");
  EXPECT_EQ(e.entry_valid, 30u);
  EXPECT_EQ(e.entry_valid_nsec, 500000000u);
  EXPECT_EQ(e.attr_valid, 1u);  // attributes: still the attribute timeout
  EXPECT_EQ(e.attr_valid_nsec, 0u);
  // CREATE's entry too.
  fuse_create_in in{};
  in.flags = O_WRONLY | O_CREAT;
  in.mode = S_IFREG | 0644;
  std::string body;
  CallsOf([&](fuse::Replier r) { fs_->Create(std::move(r), dir, "g", in); }, 0,
          &body);
  ASSERT_GE(body.size(), sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  std::memcpy(&e, body.data(), sizeof(e));
  EXPECT_EQ(e.entry_valid, 30u);
  EXPECT_EQ(e.attr_valid, 1u);
  fuse_open_out op{};
  std::memcpy(&op, body.data() + sizeof(e), sizeof(op));
  fuse_release_in rel{};
  rel.fh = op.fh;
  CallsOf([&](fuse::Replier r) { fs_->Release(std::move(r), e.nodeid, rel); });
}

TEST_F(CreateCallsTest, TimeFlushOfALinkedOrOpenFileIsStored) {
  const uint64_t dir = Dir("d", 0755, 0);
  int calls = 0;
  const fuse_attr a = Create(dir, "f", &calls);
  ASSERT_TRUE(meta().Link(a.ino, dir, "g").ok());
  EXPECT_EQ(Unlink(dir, "f"), 1);
  fuse_attr_out t{};
  EXPECT_EQ(FlushTimes(a.ino, &t), 1);  // still linked: a real SetAttr
  auto stored = meta().GetAttr(a.ino);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->ctime.sec, 5678);
  EXPECT_EQ(stored->nlink, 1u);
  // Open here when its last link goes: stored too.
  fuse_open_in oi{};
  EXPECT_EQ(
      CallsOf([&](fuse::Replier r) { fs_->Open(std::move(r), a.ino, oi); }), 1);
  EXPECT_EQ(Unlink(dir, "g"), 1);
  EXPECT_EQ(FlushTimes(a.ino, &t), 1);
  EXPECT_EQ(fs_->counters().unlink_times_folded.load(), 0u);
}

TEST_F(CreateCallsTest, SetgidDirectoryGivesItsGroupInOneCall) {
  const uint64_t dir = Dir("sgid", 02775, 50);
  int calls = 0;
  const fuse_attr f = Create(dir, "f", &calls);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(f.gid, 50u);
  EXPECT_EQ(f.mode, S_IFREG | 0600u);
  const fuse_attr d = Mkdir(dir, "sub", &calls);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(d.gid, 50u);
  EXPECT_EQ(d.mode, S_IFDIR | S_ISGID | 0700u);
  fuse_mknod_in mi{};
  mi.mode = S_IFIFO | 0666;
  mi.umask = 022;
  std::string body;
  EXPECT_EQ(
      CallsOf(
          [&](fuse::Replier r) { fs_->Mknod(std::move(r), dir, "fifo", mi); },
          0, &body),
      1);
  fuse_entry_out e{};
  ASSERT_EQ(body.size(), sizeof(e));
  std::memcpy(&e, body.data(), sizeof(e));
  EXPECT_EQ(e.attr.mode, S_IFIFO | 0644u);
  EXPECT_EQ(e.attr.gid, 50u);
  // EEXIST comes back as it did.
  fuse_create_in ci{};
  ci.mode = S_IFREG | 0644;
  EXPECT_EQ(
      CallsOf([&](fuse::Replier r) { fs_->Create(std::move(r), dir, "f", ci); },
              EEXIST),
      1);
}

TEST_F(CreateCallsTest, DefaultAclParentTakesTheAclPath) {
  const uint64_t dir = Dir("acl", 0775, 0);
  // Default ACL u::rwx g::r-x o::---: new inodes get it masked by the create
  // mode, and no umask.
  const std::string def = PosixAcl::FromMode(0750).Serialize();
  ASSERT_TRUE(meta().SetXattr(dir, kAclDefaultXattr, def, 0).ok());
  int calls = 0;
  const fuse_attr f = Create(dir, "f", &calls);
  EXPECT_EQ(f.mode, S_IFREG | 0640u);  // 0666 & ACL, umask 077 ignored
  // CreateEntry refused, then GetAttr + GetXattr of the parent, MkNode.
  EXPECT_EQ(calls, 4);
  const fuse_attr d = Mkdir(dir, "sub", &calls);
  EXPECT_EQ(d.mode, S_IFDIR | 0750u);
  auto inherited = meta().GetXattr(d.ino, kAclDefaultXattr);
  ASSERT_TRUE(inherited.ok()) << inherited.status().ToString();
  EXPECT_EQ(*inherited, def);
  EXPECT_EQ(fs_->counters().create_fallbacks.load(), 2u);
  // The fallback changed the directory another way: asked again.
  fuse_attr_out p{};
  EXPECT_EQ(GetAttr(dir, &p), 1);
}

TEST_F(CreateCallsTest, OlderMetadataServiceStillWorks) {
  counting_->entry_calls_unsupported = true;  // EOPNOTSUPP, as an old metad
  const uint64_t dir = Dir("sgid", 02775, 50);
  int calls = 0;
  fuse_attr a = Create(dir, "f0", &calls);
  EXPECT_EQ(calls, 4);  // the refused CreateEntry, GetAttr, GetXattr, MkNode
  EXPECT_EQ(a.gid, 50u);
  EXPECT_EQ(a.mode, S_IFREG | 0600u);
  a = Create(dir, "f1", &calls);
  EXPECT_EQ(calls, 3);  // not asked again
  fuse_attr_out p{};
  EXPECT_EQ(GetAttr(dir, &p), 1);
  EXPECT_EQ(Unlink(dir, "f1"), 1);  // plain Unlink
  fuse_attr_out t{};
  EXPECT_EQ(FlushTimes(a.ino, &t), 0);  // folded all the same
  EXPECT_EQ(GetAttr(dir, &p), 1);
  auto gone = meta().Lookup(dir, "f1");
  EXPECT_EQ(gone.status().code(), ENOENT);
}

// RENAME, LINK and the UNLINK of a name that leaves links: one metadata
// call each, and the kernel's requests after them (GETATTR of each changed
// directory, the time flush of the inode) answered from what that call
// committed -- exactly the stored attributes, nlink and times included.
TEST_F(CreateCallsTest, RenameIsOneCallAndAnswersTheKernelsNextRequests) {
  const uint64_t d1 = Dir("d1", 0755, 0), d2 = Dir("d2", 0755, 0);
  int calls = 0;
  const fuse_attr f = Create(d1, "f", &calls);
  fuse_attr_out p{};
  GetAttr(d1, &p);  // the create's directory attributes served
  EXPECT_EQ(Rename(d1, "f", d2, "g"), 1);
  ExpectDirFromChange(d1, "source directory");
  ExpectDirFromChange(d2, "target directory");
  fuse_attr_out t{};
  EXPECT_EQ(FlushOwnTimes(f.ino, &t), 0);
  ExpectStored(t.attr, "moved file");  // the rename's ctime, not the kernel's
  EXPECT_EQ(t.attr.nlink, 1u);
  // Served once: the next flush is stored, as any SETATTR.
  EXPECT_EQ(FlushOwnTimes(f.ino, &t), 1);
  EXPECT_EQ(GetAttr(d1, &p), 1);
  // Within one directory: one GETATTR answered.
  EXPECT_EQ(Rename(d2, "g", d2, "h"), 1);
  ExpectDirFromChange(d2, "same directory");
  EXPECT_EQ(fs_->counters().entry_times_folded.load(), 1u);
}

TEST_F(CreateCallsTest, RenameOverAFileOrphansItInOneCall) {
  const uint64_t d = Dir("d", 0755, 0);
  int calls = 0;
  const fuse_attr a = Create(d, "a", &calls);
  const fuse_attr b = Create(d, "b", &calls);
  EXPECT_EQ(Rename(d, "a", d, "b"), 1);  // no GetAttr of the replaced file
  ExpectDirFromChange(d, "directory");
  fuse_attr_out t{};
  EXPECT_EQ(FlushOwnTimes(a.ino, &t), 0);
  // The replaced file went to nlink 0 (the kernel still has it looked up).
  auto gone = meta().GetAttr(b.ino);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->nlink, 0u);
  auto now_b = meta().Lookup(d, "b");
  ASSERT_TRUE(now_b.ok());
  EXPECT_EQ(now_b->ino, a.ino);
}

TEST_F(CreateCallsTest, LinkIsOneCallAndAnswersTheKernelsNextRequests) {
  const uint64_t d1 = Dir("d1", 0755, 0), d2 = Dir("d2", 0755, 0);
  int calls = 0;
  const fuse_attr f = Create(d1, "f", &calls);
  fuse_attr e{};
  EXPECT_EQ(Link(f.ino, d2, "l", &e), 1);
  EXPECT_EQ(e.nlink, 2u);
  ExpectStored(e, "linked file");
  ExpectDirFromChange(d2, "link's directory");
  fuse_attr_out t{};
  EXPECT_EQ(FlushOwnTimes(f.ino, &t), 0);
  ExpectStored(t.attr, "linked file, time flush");
  // A flush that moves mtime (touch -m) is a change of its own: stored.
  EXPECT_EQ(Unlink(d2, "l"), 1);
  ExpectDirFromChange(d2, "unlink's directory");
  fuse_attr_out moved{};
  EXPECT_EQ(FlushTimes(f.ino, &moved), 1);
  auto stored = meta().GetAttr(f.ino);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->mtime.sec, 1234);
  EXPECT_EQ(stored->ctime.sec, 5678);
  EXPECT_EQ(stored->nlink, 1u);
}

// The lock-file loop of mail and package tools: link a file to the lock
// name, rename the lock away, unlink it. Every request the kernel sends
// for it but the three changes is answered without a metadata call.
TEST_F(CreateCallsTest, LockFileRoundIsThreeCalls) {
  const uint64_t d = Dir("spool", 0755, 0);
  int calls = 0;
  const fuse_attr base = Create(d, "base", &calls);
  fuse_attr_out p{}, t{};
  GetAttr(d, &p);
  for (int round = 0; round < 5; ++round) {
    // Metadata calls of the handlers only (the checks read metadata too).
    int handlers = 0;
    fuse_attr e{};
    handlers += Link(base.ino, d, "lock", &e);
    EXPECT_EQ(e.nlink, 2u);
    ExpectDirFromChange(d, "after link");
    handlers += FlushOwnTimes(base.ino, &t);
    handlers += Rename(d, "lock", d, "held");
    ExpectDirFromChange(d, "after rename");
    handlers += FlushOwnTimes(base.ino, &t);
    handlers += Unlink(d, "held");
    ExpectDirFromChange(d, "after unlink");
    handlers += FlushOwnTimes(base.ino, &t);
    EXPECT_EQ(t.attr.nlink, 1u);
    ExpectStored(t.attr, "after the round");
    EXPECT_EQ(handlers, 3) << "round " << round;
  }
  EXPECT_EQ(fs_->counters().entry_times_folded.load(), 15u);
}

// Another mount of the same volume keeps no copy of this one's changes:
// its GETATTR asks metadata and sees what this mount was answered.
TEST_F(CreateCallsTest, SecondMountSeesTheSameAttributes) {
  const uint64_t d1 = Dir("d1", 0755, 0), d2 = Dir("d2", 0755, 0);
  int calls = 0;
  const fuse_attr f = Create(d1, "f", &calls);
  StripeFsOptions fo;
  fo.purge_orphans_at_start = false;
  StripeFs other(&vol_->volume(), fo);
  fuse::NegotiatedInit init;
  init.max_write = 1 << 20;
  other.Init(init);
  auto getattr_other = [&](uint64_t ino) {
    std::string body;
    fuse_getattr_in in{};
    EXPECT_EQ(
        CallsOf([&](fuse::Replier r) { other.GetAttr(std::move(r), ino, in); },
                0, &body),
        1);
    fuse_attr_out o{};
    if (body.size() == sizeof(o)) std::memcpy(&o, body.data(), sizeof(o));
    return o.attr;
  };
  EXPECT_EQ(Rename(d1, "f", d2, "g"), 1);
  fuse_attr_out here{};
  EXPECT_EQ(GetAttr(d2, &here), 0);
  const fuse_attr there = getattr_other(d2);
  EXPECT_EQ(here.attr.ctime, there.ctime);
  EXPECT_EQ(here.attr.ctimensec, there.ctimensec);
  EXPECT_EQ(here.attr.nlink, there.nlink);
  fuse_attr_out t{};
  EXPECT_EQ(FlushOwnTimes(f.ino, &t), 0);
  const fuse_attr file_there = getattr_other(f.ino);
  EXPECT_EQ(t.attr.ctime, file_there.ctime);
  EXPECT_EQ(t.attr.ctimensec, file_there.ctimensec);
}

TEST_F(CreateCallsTest, OlderMetadataServiceRenamesAndLinks) {
  counting_->entry_calls_unsupported = true;
  const uint64_t d = Dir("d", 0755, 0);
  int calls = 0;
  const fuse_attr a = Create(d, "a", &calls);
  Create(d, "b", &calls);
  EXPECT_EQ(Rename(d, "a", d, "b"), 3);  // refused RenameEntry, Rename, GetAttr
  fuse_attr_out p{};
  EXPECT_EQ(GetAttr(d, &p), 1);
  fuse_attr e{};
  EXPECT_EQ(Link(a.ino, d, "l", &e), 2);  // refused LinkEntry, Link
  EXPECT_EQ(e.nlink, 2u);
  EXPECT_EQ(Link(a.ino, d, "m", &e), 1);  // not asked again
  EXPECT_EQ(GetAttr(d, &p), 1);
  fuse_attr_out t{};
  EXPECT_EQ(FlushOwnTimes(a.ino, &t), 0);  // Link's attributes serve
  ExpectStored(t.attr, "after the fallback link");
}

}  // namespace
}  // namespace stripefs::fs
