// StripeFs's namespace changes: CREATE/MKNOD/MKDIR/SYMLINK, LINK, UNLINK,
// RMDIR, RENAME, and the kernel's time flush that follows a link, unlink
// or rename (docs/filesystem.md, "Metadata calls per namespace change").
//
// Each change is one metadata call where the service answers the
// one-call forms (CreateEntry, UnlinkEntry, LinkEntry, RenameEntry): they
// return the directories' and the inode's attributes as committed, kept
// for the requests the kernel sends next -- the GETATTR of each changed
// directory (DirAttrCache) and, under the writeback cache, the SETATTR of
// mtime and ctime on the inode (Node::changed, FoldTimeFlush). A service
// without them (an older metad: EOPNOTSUPP) gets the several-call path.
#include <fcntl.h>
#include <sys/stat.h>

#include "fs/stripe_fs.h"
#include "fs/stripe_fs_internal.h"

namespace stripefs::fs {

using namespace fuse_abi;  // NOLINT
using fuse::Replier;
using internal::NewInodeAcl;
using internal::NewOwner;
using internal::OwnerFor;

namespace {

constexpr uint32_t kRenameMask = fuse_abi::kRenameNoReplace |
                                 fuse_abi::kRenameExchange |
                                 fuse_abi::kRenameWhiteout;

// The only bits of the kernel's time flush (fuse_flush_times: mtime and,
// since 7.23, ctime; fh and lock owner when it has a file).
constexpr uint32_t kTimeFlushBits =
    FATTR_MTIME | FATTR_CTIME | FATTR_FH | FATTR_LOCKOWNER;

bool SameTime(const Timespec& a, uint64_t sec, uint32_t nsec) {
  return a.sec == static_cast<int64_t>(sec) && a.nsec == nsec;
}

}  // namespace

void StripeFs::NoteChanged(const InodeAttr& a) {
  std::lock_guard<std::mutex> lock(nodes_mu_);
  auto it = nodes_.find(a.ino);
  if (it == nodes_.end()) return;  // the kernel does not know it: no flush
  it->second.changed = a;
  it->second.changed_at = std::chrono::steady_clock::now();
}

std::optional<StripeFs::FoldedFlush> StripeFs::FoldTimeFlush(
    uint64_t ino, const fuse_setattr_in& in) {
  if (!(in.valid & FATTR_CTIME) || (in.valid & ~kTimeFlushBits) != 0)
    return std::nullopt;
  std::lock_guard<std::mutex> lock(nodes_mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || !it->second.changed || writers_.count(ino) != 0)
    return std::nullopt;
  Node& n = it->second;
  FoldedFlush f{*n.changed, n.changed->nlink == 0};
  if (f.unlinked) {
    // Waiting for its purge: nobody will see stored times. The kernel gets
    // the times it sent.
    if (n.opens != 0) return std::nullopt;
    if (in.valid & FATTR_MTIME)
      f.attr.mtime = {static_cast<int64_t>(in.mtime), in.mtimensec};
    f.attr.ctime = {static_cast<int64_t>(in.ctime), in.ctimensec};
    return f;
  }
  // Still linked: only a flush that restates the change (the mtime the
  // change left, within the attribute timeout of it, once) is answered
  // from it; the ctime stays the one the change committed.
  n.changed.reset();
  if (std::chrono::steady_clock::now() - n.changed_at >= options_.attr_timeout)
    return std::nullopt;
  if ((in.valid & FATTR_MTIME) &&
      !SameTime(f.attr.mtime, in.mtime, in.mtimensec))
    return std::nullopt;
  return f;
}

void StripeFs::Symlink(Replier r, uint64_t parent, std::string_view name,
                       std::string_view target) {
  dir_attrs_.Forget(parent);
  NewOwner o = OwnerFor(meta_, parent, r, S_IFLNK | 0777);
  auto a = meta_.Symlink(parent, std::string(name), std::string(target), o.uid,
                         o.gid);
  if (!a.ok()) return Fail(r, a.status());
  r.Entry(MakeEntry(*a));
}

Result<InodeAttr> StripeFs::NewEntry(const Replier& r, uint64_t parent,
                                     std::string_view name, uint32_t mode,
                                     uint32_t rdev, uint32_t umask) {
  const bool dont_mask = dont_mask_.load();
  if (entry_calls_.load(std::memory_order_relaxed)) {
    CreateEntryRequest req;
    req.parent = parent;
    req.name = std::string(name);
    // No default ACL (else refused below): the umask applies, if ours.
    req.mode = dont_mask ? mode & ~(umask & 0777) : mode;
    req.uid = r.ctx().uid;
    req.gid = r.ctx().gid;
    req.rdev = rdev;
    req.flags = kCreateInheritSetgid | kCreateUnlessDefaultAcl;
    const uint64_t token = dir_attrs_.BeginChange();
    auto c = meta_.CreateEntry(req);
    if (c.ok()) {
      dir_attrs_.Put(token, c->parent, DirAttrCache::Clock::now());
      return c->node;
    }
    if (c.status().code() == EOPNOTSUPP) {
      entry_calls_.store(false, std::memory_order_relaxed);
    } else if (c.status().code() != kCreateNeedsAcl) {
      return c.status();
    }
  }
  counters_.create_fallbacks.fetch_add(1, std::memory_order_relaxed);
  dir_attrs_.Forget(parent);
  NewOwner o = OwnerFor(meta_, parent, r, mode);
  auto acl = NewInodeAcl(meta_, parent, &o, umask, dont_mask);
  if (!acl.ok()) return acl.status();
  auto a =
      S_ISDIR(mode)
          ? meta_.Mkdir(parent, std::string(name), o.mode, o.uid, o.gid)
          : meta_.MkNode(parent, std::string(name), o.mode, o.uid, o.gid, rdev);
  if (!a.ok()) return a;
  STRIPEFS_RETURN_IF_ERROR(StoreInheritedAcl(meta_, a->ino, *acl));
  return a;
}

void StripeFs::Mknod(Replier r, uint64_t parent, std::string_view name,
                     const fuse_mknod_in& in) {
  auto a = NewEntry(r, parent, name, in.mode, in.rdev, in.umask);
  if (!a.ok()) return Fail(r, a.status());
  r.Entry(MakeEntry(*a));
}

void StripeFs::Mkdir(Replier r, uint64_t parent, std::string_view name,
                     const fuse_mkdir_in& in) {
  auto a = NewEntry(r, parent, name, S_IFDIR | (in.mode & 07777), 0, in.umask);
  if (!a.ok()) return Fail(r, a.status());
  r.Entry(MakeEntry(*a));
}

void StripeFs::Unlink(Replier r, uint64_t parent, std::string_view name) {
  std::optional<InodeAttr> victim;
  if (entry_calls_.load(std::memory_order_relaxed)) {
    const uint64_t token = dir_attrs_.BeginChange();
    auto c = meta_.UnlinkEntry(parent, std::string(name));
    if (c.ok()) {
      dir_attrs_.Put(token, c->parent, DirAttrCache::Clock::now());
      victim = c->node;
    } else if (c.status().code() == EOPNOTSUPP) {
      entry_calls_.store(false, std::memory_order_relaxed);
    } else {
      return Fail(r, c.status());
    }
  }
  if (!victim) {
    dir_attrs_.Forget(parent);
    auto a = meta_.Unlink(parent, std::string(name));
    if (!a.ok()) return Fail(r, a.status());
    victim = *a;
  }
  NoteChanged(*victim);
  if (victim->nlink == 0) MarkOrphan(victim->ino);
  r.Ok();
}

void StripeFs::Rmdir(Replier r, uint64_t parent, std::string_view name) {
  // The kernel holds the directory locked: the looked-up inode is the one
  // removed. It stays an orphan while open or looked up.
  dir_attrs_.Forget(parent);
  auto victim = meta_.Lookup(parent, std::string(name));
  if (victim.ok()) dir_attrs_.Forget(victim->ino);
  Status st = meta_.Rmdir(parent, std::string(name));
  if (!st.ok()) return Fail(r, st);
  if (victim.ok()) MarkOrphan(victim->ino);
  r.Ok();
}

Result<RenameChange> StripeFs::RenameCalls(uint64_t olddir,
                                           const std::string& oldname,
                                           uint64_t newdir,
                                           const std::string& newname,
                                           uint32_t flags) {
  if (rename_entry_calls_.load(std::memory_order_relaxed)) {
    const uint64_t token = dir_attrs_.BeginChange();
    const uint64_t attr_token = attr_cache_.BeginFetch();
    auto c = meta_.RenameEntry(olddir, oldname, newdir, newname, flags);
    if (c.ok()) {
      const auto now = DirAttrCache::Clock::now();
      dir_attrs_.Put(token, c->parent, now);
      if (newdir != olddir) dir_attrs_.Put(token, c->new_parent, now);
      if (S_ISDIR(c->node.mode)) dir_attrs_.Put(token, c->node, now);
      Revalidate(attr_token, c->node, Growth::kIgnore);
      NoteChanged(c->node);
      return c;
    }
    if (c.status().code() != EOPNOTSUPP) return c.status();
    rename_entry_calls_.store(false, std::memory_order_relaxed);
  }
  dir_attrs_.Forget(olddir);
  dir_attrs_.Forget(newdir);
  RenameChange c;
  STRIPEFS_RETURN_IF_ERROR(
      meta_.Rename(olddir, oldname, newdir, newname, flags, &c.replaced));
  if (c.replaced != 0) {
    auto a = meta_.GetAttr(c.replaced);
    if (a.ok() && !S_ISDIR(a->mode)) c.replaced_attr = *a;
  }
  return c;
}

void StripeFs::Rename(Replier r, uint64_t olddir, std::string_view oldname,
                      uint64_t newdir, std::string_view newname,
                      uint32_t flags) {
  if (flags & ~kRenameMask) return Fail(r, EINVAL);
  auto c = RenameCalls(olddir, std::string(oldname), newdir,
                       std::string(newname), flags);
  if (!c.ok()) return Fail(r, c.status());
  if (c->replaced != 0) {
    // A replaced directory (no attributes) is orphaned, as by RMDIR.
    if (c->replaced_attr) {
      NoteChanged(*c->replaced_attr);
    } else {
      dir_attrs_.Forget(c->replaced);
    }
    if (!c->replaced_attr || c->replaced_attr->nlink == 0)
      MarkOrphan(c->replaced);
  }
  r.Ok();
}

void StripeFs::Link(Replier r, uint64_t oldnode, uint64_t newparent,
                    std::string_view newname) {
  std::optional<InodeAttr> a;
  const uint64_t attr_token = attr_cache_.BeginFetch();
  if (link_entry_calls_.load(std::memory_order_relaxed)) {
    const uint64_t token = dir_attrs_.BeginChange();
    auto c = meta_.LinkEntry(oldnode, newparent, std::string(newname));
    if (c.ok()) {
      dir_attrs_.Put(token, c->parent, DirAttrCache::Clock::now());
      a = c->node;
    } else if (c.status().code() == EOPNOTSUPP) {
      link_entry_calls_.store(false, std::memory_order_relaxed);
    } else {
      return Fail(r, c.status());
    }
  }
  if (!a) {
    dir_attrs_.Forget(newparent);
    auto l = meta_.Link(oldnode, newparent, std::string(newname));
    if (!l.ok()) return Fail(r, l.status());
    a = *l;
  }
  {  // an O_TMPFILE given a name is no orphan any more
    std::lock_guard<std::mutex> lock(nodes_mu_);
    auto it = nodes_.find(oldnode);
    if (it != nodes_.end()) it->second.maybe_orphan = false;
  }
  Revalidate(attr_token, *a, Growth::kIgnore);
  NoteChanged(*a);
  if (S_ISREG(a->mode)) {
    if (auto w = WriterFor(a->ino, false))
      a->size = std::max(a->size, w->BufferedEnd());
  }
  r.Entry(MakeEntry(*a));
}

}  // namespace stripefs::fs
