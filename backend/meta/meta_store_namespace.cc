// MetaStore's namespace: lookups and directory listings (reads, without
// mu_) and the mutations that change directory entries (create, link,
// unlink, rmdir, rename), each one transaction acknowledged as a namespace
// mutation (MetaStoreOptions::namespace_sync_delay).
#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "backend/meta/meta_store.h"
#include "backend/meta/meta_store_mutation.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)
using meta_internal::InoStr;
using meta_internal::IsDir;
using meta_internal::SnapshotReader;

namespace {

constexpr size_t kNameMax = 255;
constexpr size_t kSymlinkMax = 4095;
constexpr uint32_t kRenameNoReplace = 1;
constexpr uint32_t kRenameExchange = 2;
constexpr uint32_t kRenameWhiteout = 4;
constexpr char kDefaultAclXattr[] = "system.posix_acl_default";

// Checks a directory entry name. "." and ".." pass; callers decide.
Status ValidateName(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("empty file name");
  if (name.size() > kNameMax) {
    return Status(ENAMETOOLONG, "file name of " + std::to_string(name.size()) +
                                    " bytes is longer than 255");
  }
  if (name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Status::InvalidArgument("file name contains '/' or a NUL byte");
  }
  return Status::Ok();
}

bool IsDots(const std::string& name) { return name == "." || name == ".."; }

}  // namespace

Result<InodeAttr> MetaStore::Lookup(uint64_t parent, const std::string& name) {
  if (name.empty()) return Status::NotFound("empty file name");
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  if (name == "." || name == "..") {
    SnapshotReader r(kv_.get());
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, r.Dir(parent));
    if (name == ".") return dir.attr;
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord up, r.Inode(dir.parent));
    return up.attr;
  }
  // The hot path: two point reads, no snapshot (taking one costs a DB
  // mutex). An entry removed between the reads is reported as ENOENT, as if
  // the lookup had come after the removal.
  STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> dv,
                            kv_->Get(DentryKey(parent, name)));
  if (dv) {
    STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*dv));
    return GetAttr(d.ino);
  }
  // No entry: say why (missing parent, parent not a directory, no name).
  STRIPEFS_ASSIGN_OR_RETURN(std::string v,
                            Get(InodeKey(parent), InoStr(parent)));
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, DecodeInode(v));
  if (!IsDir(dir.attr.mode)) {
    return Status(ENOTDIR, InoStr(parent) + " is not a directory");
  }
  return Status::NotFound("'" + name + "' does not exist in " + InoStr(parent));
}

Result<std::string> MetaStore::ReadLink(uint64_t ino) {
  SnapshotReader r(kv_.get());
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, r.Inode(ino));
  if (!S_ISLNK(rec.attr.mode)) {
    return Status::InvalidArgument(InoStr(ino) + " is not a symbolic link");
  }
  return r.Get(SymlinkKey(ino), "symlink target of " + InoStr(ino));
}

Result<std::vector<DirEntry>> MetaStore::ReadDir(uint64_t ino, uint64_t cookie,
                                                 uint32_t max_entries) {
  SnapshotReader r(kv_.get());
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord dir, r.Dir(ino));
  std::vector<DirEntry> out;
  if (cookie < kCookieDot && out.size() < max_entries) {
    out.push_back(DirEntry{".", ino, S_IFDIR, kCookieDot});
  }
  if (cookie < kCookieDotDot && out.size() < max_entries) {
    out.push_back(DirEntry{"..", dir.parent, S_IFDIR, kCookieDotDot});
  }
  if (out.size() >= max_entries ||
      cookie == std::numeric_limits<uint64_t>::max()) {
    return out;
  }
  std::string prefix = CookiePrefix(ino);
  STRIPEFS_ASSIGN_OR_RETURN(
      std::vector<KvPair> cookies,
      r.Range(CookieKey(ino, std::max(cookie + 1, kFirstEntrySeq)),
              PrefixEnd(prefix), max_entries - out.size()));
  for (KvPair& p : cookies) {
    STRIPEFS_ASSIGN_OR_RETURN(uint64_t seq, ParseCookieSeq(p.key));
    std::string name = std::move(p.value);
    STRIPEFS_ASSIGN_OR_RETURN(
        std::string v, r.Get(DentryKey(ino, name), "entry '" + name + "'"));
    STRIPEFS_ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(v));
    out.push_back(DirEntry{std::move(name), d.ino, d.type, seq});
  }
  return out;
}

// --- namespace mutations -------------------------------------------------

Result<EntryChange> MetaStore::CreateNode(
    uint64_t parent, const std::string& name, uint32_t mode, uint32_t uid,
    uint32_t gid, uint32_t rdev, const std::string* symlink, uint32_t flags) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Result<EntryChange> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (IsDots(name)) return Status::Exists("'" + name + "' always exists");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> existing,
                              m.GetDentry(parent, name));
    if (existing) {
      return Status::Exists("'" + name + "' already exists in " +
                            InoStr(parent));
    }
    if (flags & kCreateUnlessDefaultAcl) {
      // Read in the transaction: a default ACL set concurrently either
      // conflicts with this create or is seen here.
      STRIPEFS_ASSIGN_OR_RETURN(
          std::optional<std::string> acl,
          m.txn().Get(XattrKey(parent, kDefaultAclXattr)));
      if (acl) {
        return Status(kCreateNeedsAcl, InoStr(parent) +
                                           " has a default ACL: the caller "
                                           "decides the new inode's ACLs");
      }
    }
    uint32_t new_mode = mode;
    uint32_t new_gid = gid;
    if ((flags & kCreateInheritSetgid) && (dir->attr.mode & S_ISGID)) {
      new_gid = dir->attr.gid;
      if (IsDir(mode)) new_mode |= S_ISGID;
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.NewInode());
    rec->attr.mode = new_mode;
    rec->attr.uid = uid;
    rec->attr.gid = new_gid;
    rec->attr.rdev = rdev;
    if (IsDir(mode)) {
      rec->attr.nlink = 2;
      rec->parent = parent;
      rec->next_seq = kFirstEntrySeq;
      dir->attr.nlink++;
    } else {
      rec->attr.nlink = 1;
    }
    if (symlink) {
      rec->attr.size = symlink->size();
      m.txn().Put(SymlinkKey(rec->attr.ino), *symlink);
    }
    m.PutDentry(parent, name,
                DentryValue{rec->attr.ino, mode & S_IFMT, dir->next_seq++});
    dir->attr.mtime = dir->attr.ctime = m.now();
    EntryChange out{rec->attr, dir->attr};
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Result<InodeAttr> MetaStore::CreateAnonymous(uint64_t parent, uint32_t mode,
                                             uint32_t uid, uint32_t gid) {
  return MutateNamespace([&]() -> Result<InodeAttr> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.Inode(parent));
    if (!IsDir(dir->attr.mode)) {
      return Status(ENOTDIR, InoStr(parent) + " is not a directory");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.NewInode());
    rec->attr.mode = S_IFREG | (mode & 07777);
    rec->attr.uid = uid;
    rec->attr.gid = gid;
    rec->attr.nlink = 0;
    m.txn().Put(OrphanKey(rec->attr.ino), std::string(kOrphanLinkable));
    InodeAttr attr = rec->attr;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return attr;
  });
}

Result<InodeAttr> MetaStore::MkNode(uint64_t parent, const std::string& name,
                                    uint32_t mode, uint32_t uid, uint32_t gid,
                                    uint32_t rdev) {
  uint32_t type = mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (name.empty() && type == S_IFREG)
    return CreateAnonymous(parent, mode, uid, gid);
  if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK &&
      type != S_IFIFO && type != S_IFSOCK) {
    return Status::InvalidArgument(
        "MkNode makes regular files, devices, fifos and sockets; use Mkdir "
        "or Symlink for other types");
  }
  auto r = CreateNode(parent, name, type | (mode & 07777), uid, gid,
                      (type == S_IFCHR || type == S_IFBLK) ? rdev : 0, nullptr);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<InodeAttr> MetaStore::Mkdir(uint64_t parent, const std::string& name,
                                   uint32_t mode, uint32_t uid, uint32_t gid) {
  auto r =
      CreateNode(parent, name, S_IFDIR | (mode & 07777), uid, gid, 0, nullptr);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<EntryChange> MetaStore::CreateEntry(const CreateEntryRequest& req) {
  if (req.name.empty())
    return Status::InvalidArgument("CreateEntry needs a name");
  if ((req.flags & ~kCreateEntryFlagsAll) != 0) {
    return Status::InvalidArgument("unknown CreateEntry flags " +
                                   std::to_string(req.flags));
  }
  uint32_t type = req.mode & S_IFMT;
  if (type == 0) type = S_IFREG;
  if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK &&
      type != S_IFIFO && type != S_IFSOCK && type != S_IFDIR) {
    return Status::InvalidArgument(
        "CreateEntry makes regular files, devices, fifos, sockets and "
        "directories");
  }
  return CreateNode(
      req.parent, req.name, type | (req.mode & 07777), req.uid, req.gid,
      (type == S_IFCHR || type == S_IFBLK) ? req.rdev : 0, nullptr, req.flags);
}

Result<InodeAttr> MetaStore::Symlink(uint64_t parent, const std::string& name,
                                     const std::string& target, uint32_t uid,
                                     uint32_t gid) {
  if (target.empty()) return Status::NotFound("empty symlink target");
  if (target.size() > kSymlinkMax) {
    return Status(ENAMETOOLONG, "symlink target longer than 4095 bytes");
  }
  if (target.find('\0') != std::string::npos) {
    return Status::InvalidArgument("symlink target contains a NUL byte");
  }
  auto r = CreateNode(parent, name, S_IFLNK | 0777, uid, gid, 0, &target);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<InodeAttr> MetaStore::Link(uint64_t ino, uint64_t new_parent,
                                  const std::string& new_name) {
  auto r = LinkEntry(ino, new_parent, new_name);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<EntryChange> MetaStore::LinkEntry(uint64_t ino, uint64_t new_parent,
                                         const std::string& new_name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(new_name));
  return MutateNamespace([&]() -> Result<EntryChange> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    if (IsDir(rec->attr.mode)) {
      return Status(EPERM, "cannot hard-link directory " + InoStr(ino));
    }
    const bool relink = rec->attr.nlink == 0;
    if (relink) {
      // Read in the transaction: a concurrent link or purge of the same
      // orphan then conflicts instead of both seeing the mark.
      STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> orphan,
                                m.txn().Get(OrphanKey(ino)));
      if (!orphan || *orphan != kOrphanLinkable) {
        return Status::NotFound(InoStr(ino) + " was unlinked");
      }
    }
    if (rec->attr.nlink == std::numeric_limits<uint32_t>::max()) {
      return Status(EMLINK, InoStr(ino) + " has too many links");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(new_parent));
    if (IsDots(new_name))
      return Status::Exists("'" + new_name + "' always exists");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> existing,
                              m.GetDentry(new_parent, new_name));
    if (existing) {
      return Status::Exists("'" + new_name + "' already exists in " +
                            InoStr(new_parent));
    }
    m.PutDentry(new_parent, new_name,
                DentryValue{ino, rec->attr.mode & S_IFMT, dir->next_seq++});
    rec->attr.nlink++;
    if (relink) m.txn().Delete(OrphanKey(ino));  // O_TMPFILE gets a name
    rec->attr.ctime = m.now();
    dir->attr.mtime = dir->attr.ctime = m.now();
    EntryChange out{rec->attr, dir->attr};
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Result<InodeAttr> MetaStore::Unlink(uint64_t parent, const std::string& name) {
  auto r = UnlinkEntry(parent, name);
  if (!r.ok()) return r.status();
  return r->node;
}

Result<EntryChange> MetaStore::UnlinkEntry(uint64_t parent,
                                           const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Result<EntryChange> {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (IsDots(name)) return Status(EISDIR, "'" + name + "' is a directory");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> d,
                              m.GetDentry(parent, name));
    if (!d) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    if (IsDir(d->type)) {
      return Status(EISDIR, "'" + name + "' is a directory (use rmdir)");
    }
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(d->ino));
    m.DeleteDentry(parent, name, d->seq);
    if (rec->attr.nlink > 0) rec->attr.nlink--;
    rec->attr.ctime = m.now();
    if (rec->attr.nlink == 0) m.txn().Put(OrphanKey(d->ino), "");
    dir->attr.mtime = dir->attr.ctime = m.now();
    EntryChange out{rec->attr, dir->attr};
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Status MetaStore::Rmdir(uint64_t parent, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * dir, m.ModifyDir(parent));
    if (name == ".") return Status::InvalidArgument("cannot rmdir '.'");
    if (name == "..") return Status(ENOTEMPTY, "cannot rmdir '..'");
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> d,
                              m.GetDentry(parent, name));
    if (!d) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    if (!IsDir(d->type)) {
      return Status(ENOTDIR, "'" + name + "' is not a directory");
    }
    STRIPEFS_ASSIGN_OR_RETURN(bool empty, m.DirIsEmpty(d->ino));
    if (!empty) {
      return Status(ENOTEMPTY, "directory '" + name + "' is not empty");
    }
    m.DeleteDentry(parent, name, d->seq);
    STRIPEFS_RETURN_IF_ERROR(m.OrphanDirectory(d->ino));
    dir->attr.nlink--;
    dir->attr.mtime = dir->attr.ctime = m.now();
    return m.Commit();
  });
}

Result<bool> MetaStore::IsAncestor(Mutation& m, uint64_t ancestor,
                                   uint64_t ino) {
  // Bounded walk up the '..' chain: a longer chain means a cycle.
  for (int depth = 0; depth < (1 << 20); ++depth) {
    if (ino == ancestor) return true;
    if (ino == kRootInode) return false;
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Inode(ino));
    ino = rec->parent;
  }
  return Status::Corruption(
      "directory parent chain loops; the metadata "
      "store is damaged");
}

// RENAME_WHITEOUT: the source name becomes an overlayfs whiteout, a
// character device 0/0 with mode 0, owned like the inode that moved.
Status MetaStore::PutWhiteout(Mutation& m, uint64_t parent,
                              const std::string& name, const InodeRecord& moved,
                              InodeRecord* pdir) {
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * w, m.NewInode());
  w->attr.mode = S_IFCHR;
  w->attr.uid = moved.attr.uid;
  w->attr.gid = moved.attr.gid;
  w->attr.nlink = 1;
  m.PutDentry(parent, name,
              DentryValue{w->attr.ino, S_IFCHR, pdir->next_seq++});
  return Status::Ok();
}

// One rename, as Rename's steps see it: the two names, their directories
// (loaded for writing) and entries, and the moved inode.
struct MetaStore::RenameSides {
  uint64_t parent;
  const std::string& name;
  uint64_t new_parent;
  const std::string& new_name;
  InodeRecord* pdir;
  InodeRecord* npdir;
  DentryValue src;
  std::optional<DentryValue> dst;
  InodeRecord* srec;  // loaded for writing after the loop check
  Timespec now;
};

Status MetaStore::Rename(uint64_t parent, const std::string& name,
                         uint64_t new_parent, const std::string& new_name,
                         uint32_t flags, uint64_t* replaced) {
  if (replaced) *replaced = 0;
  auto r = RenameEntry(parent, name, new_parent, new_name, flags);
  if (!r.ok()) return r.status();
  if (replaced) *replaced = r->replaced;
  return Status::Ok();
}

Result<RenameChange> MetaStore::RenameEntry(uint64_t parent,
                                            const std::string& name,
                                            uint64_t new_parent,
                                            const std::string& new_name,
                                            uint32_t flags) {
  if ((flags & ~(kRenameNoReplace | kRenameExchange | kRenameWhiteout)) != 0 ||
      ((flags & kRenameExchange) && flags != kRenameExchange)) {
    return Status::InvalidArgument("unsupported rename flags " +
                                   std::to_string(flags));
  }
  const bool exchange = flags & kRenameExchange;
  STRIPEFS_RETURN_IF_ERROR(ValidateName(name));
  STRIPEFS_RETURN_IF_ERROR(ValidateName(new_name));
  return MutateNamespace([&]() -> Result<RenameChange> {
    RenameChange out;
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * pdir, m.ModifyDir(parent));
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * npdir, m.ModifyDir(new_parent));
    if (IsDots(name) || IsDots(new_name)) {
      return Status(EBUSY, "cannot rename '.' or '..'");
    }
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> src,
                              m.GetDentry(parent, name));
    if (!src) {
      return Status::NotFound("'" + name + "' does not exist in " +
                              InoStr(parent));
    }
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<DentryValue> dst,
                              m.GetDentry(new_parent, new_name));
    if (exchange && !dst) {
      return Status::NotFound("'" + new_name + "' does not exist in " +
                              InoStr(new_parent) + " (RENAME_EXCHANGE)");
    }
    if ((flags & kRenameNoReplace) && dst) {
      return Status::Exists("'" + new_name + "' already exists in " +
                            InoStr(new_parent) + " (RENAME_NOREPLACE)");
    }
    // Both names already refer to the same inode: POSIX says do nothing
    // (nothing is written; the attributes as they are).
    if (dst && dst->ino == src->ino) {
      STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * same, m.Inode(src->ino));
      return RenameChange{same->attr, pdir->attr, npdir->attr, 0, {}};
    }

    RenameSides r{.parent = parent,
                  .name = name,
                  .new_parent = new_parent,
                  .new_name = new_name,
                  .pdir = pdir,
                  .npdir = npdir,
                  .src = *src,
                  .dst = dst,
                  .srec = nullptr,
                  .now = m.now()};
    STRIPEFS_RETURN_IF_ERROR(CheckRenameLoops(m, r, exchange));
    STRIPEFS_ASSIGN_OR_RETURN(r.srec, m.Modify(src->ino));
    if (exchange) {
      STRIPEFS_RETURN_IF_ERROR(RenameExchange(m, r));
    } else {
      STRIPEFS_RETURN_IF_ERROR(
          RenameMove(m, r, (flags & kRenameWhiteout) != 0, &out));
    }
    r.srec->attr.ctime = r.now;
    pdir->attr.mtime = pdir->attr.ctime = r.now;
    npdir->attr.mtime = npdir->attr.ctime = r.now;
    out.node = r.srec->attr;
    out.parent = pdir->attr;
    out.new_parent = npdir->attr;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return out;
  });
}

Status MetaStore::CheckRenameLoops(Mutation& m, const RenameSides& r,
                                   bool exchange) {
  if (r.parent == r.new_parent) return Status::Ok();
  if (IsDir(r.src.type)) {
    STRIPEFS_ASSIGN_OR_RETURN(bool loop,
                              IsAncestor(m, r.src.ino, r.new_parent));
    if (loop) {
      return Status::InvalidArgument("cannot move directory '" + r.name +
                                     "' into its own subtree");
    }
  }
  if (exchange && IsDir(r.dst->type)) {
    STRIPEFS_ASSIGN_OR_RETURN(bool loop, IsAncestor(m, r.dst->ino, r.parent));
    if (loop) {
      return Status::InvalidArgument("cannot move directory '" + r.new_name +
                                     "' into its own subtree");
    }
  }
  return Status::Ok();
}

Status MetaStore::RenameExchange(Mutation& m, const RenameSides& r) {
  const DentryValue& src = r.src;
  const DentryValue& dst = *r.dst;
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * drec, m.Modify(dst.ino));
  // Each name keeps its cookie; only the targets swap.
  m.PutDentry(r.parent, r.name, DentryValue{dst.ino, dst.type, src.seq});
  m.PutDentry(r.new_parent, r.new_name,
              DentryValue{src.ino, src.type, dst.seq});
  if (r.parent != r.new_parent) {
    if (IsDir(src.type)) {
      r.srec->parent = r.new_parent;
      r.pdir->attr.nlink--;
      r.npdir->attr.nlink++;
    }
    if (IsDir(dst.type)) {
      drec->parent = r.parent;
      r.npdir->attr.nlink--;
      r.pdir->attr.nlink++;
    }
  }
  drec->attr.ctime = r.now;
  return Status::Ok();
}

Status MetaStore::RenameMove(Mutation& m, const RenameSides& r, bool whiteout,
                             RenameChange* out) {
  const DentryValue& src = r.src;
  const bool src_dir = IsDir(src.type);
  uint64_t seq;
  if (r.dst) {
    const DentryValue& dst = *r.dst;
    const bool dst_dir = IsDir(dst.type);
    if (src_dir && !dst_dir) {
      return Status(ENOTDIR, "cannot replace non-directory '" + r.new_name +
                                 "' with directory '" + r.name + "'");
    }
    if (!src_dir && dst_dir) {
      return Status(EISDIR, "cannot replace directory '" + r.new_name +
                                "' with non-directory '" + r.name + "'");
    }
    if (dst_dir) {
      STRIPEFS_ASSIGN_OR_RETURN(bool empty, m.DirIsEmpty(dst.ino));
      if (!empty) {
        return Status(ENOTEMPTY, "directory '" + r.new_name + "' is not empty");
      }
      STRIPEFS_RETURN_IF_ERROR(m.OrphanDirectory(dst.ino));
      r.npdir->attr.nlink--;
    } else {
      STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * drec, m.Modify(dst.ino));
      if (drec->attr.nlink > 0) drec->attr.nlink--;
      drec->attr.ctime = r.now;
      if (drec->attr.nlink == 0) m.txn().Put(OrphanKey(dst.ino), "");
      out->replaced_attr = drec->attr;
    }
    out->replaced = dst.ino;
    seq = dst.seq;  // the moved entry takes over the replaced one's slot
  } else {
    seq = r.npdir->next_seq++;
  }
  m.DeleteDentry(r.parent, r.name, src.seq);
  m.PutDentry(r.new_parent, r.new_name, DentryValue{src.ino, src.type, seq});
  if (whiteout) {
    STRIPEFS_RETURN_IF_ERROR(PutWhiteout(m, r.parent, r.name, *r.srec, r.pdir));
  }
  if (src_dir && r.parent != r.new_parent) {
    r.srec->parent = r.new_parent;
    r.pdir->attr.nlink--;
    r.npdir->attr.nlink++;
  }
  return Status::Ok();
}

}  // namespace stripefs
