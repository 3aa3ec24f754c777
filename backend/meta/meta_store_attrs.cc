// MetaStore: inode attributes (getattr, setattr with truncation) and
// extended attributes, POSIX ACLs among them (system.posix_acl_*, plain
// xattrs here; fs/posix_acl.h interprets them). A setattr that
// shrinks a file drops stripes and is durable when it returns; the others
// are namespace mutations.
#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include "backend/meta/meta_store.h"
#include "backend/meta/meta_store_mutation.h"

namespace stripefs {

using namespace meta_schema;  // NOLINT(google-build-using-namespace)
using meta_internal::InoStr;
using meta_internal::IsDir;
using meta_internal::IsReg;
using meta_internal::SnapshotReader;

namespace {

constexpr size_t kXattrNameMax = 255;
constexpr size_t kXattrValueMax = 64 * 1024;
constexpr uint32_t kXattrCreate = 1;
constexpr uint32_t kXattrReplace = 2;

Status ValidateXattrName(const std::string& name) {
  if (name.empty() || name.size() > kXattrNameMax) {
    return Status(ERANGE, "xattr name must be 1..255 bytes, got " +
                              std::to_string(name.size()));
  }
  return Status::Ok();
}

}  // namespace

Result<InodeAttr> MetaStore::GetAttr(uint64_t ino) {
  STRIPEFS_ASSIGN_OR_RETURN(std::string v, Get(InodeKey(ino), InoStr(ino)));
  STRIPEFS_ASSIGN_OR_RETURN(InodeRecord rec, DecodeInode(v));
  return rec.attr;
}

Result<InodeAttr> MetaStore::SetAttr(uint64_t ino, const SetAttrRequest& req,
                                     std::vector<ObsoleteStripe>* obsolete) {
  std::vector<ObsoleteStripe> dropped;
  // A size change drops stripes whose chunks are deleted next: durable.
  const bool resizes = (req.mask & kSetSize) != 0;
  auto result = MutateNamespace(resizes, [&]() -> Result<InodeAttr> {
    dropped.clear();
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    InodeAttr& a = rec->attr;
    if (req.mask == 0) return a;
    const Timespec now = m.now();
    if (req.mask & kSetSize) {
      if (IsDir(a.mode)) return Status(EISDIR, InoStr(ino) + " is a directory");
      if (!IsReg(a.mode)) {
        return Status::InvalidArgument("cannot set the size of " + InoStr(ino) +
                                       ": not a regular file");
      }
      const uint64_t new_size =
          (req.mask & kSetSizeAtLeast) ? std::max(a.size, req.size) : req.size;
      if (new_size < a.size) {
        const uint64_t s = geometry_.stripe_size();
        const uint64_t first_dropped = new_size / s + (new_size % s ? 1 : 0);
        STRIPEFS_RETURN_IF_ERROR(
            DropStripesFrom(m, ino, first_dropped, &dropped));
      }
      m.stats().bytes_used = m.stats().bytes_used - a.size + new_size;
      if (new_size != a.size && !(req.mask & kKeepTimes)) a.mtime = now;
      a.size = new_size;
    }
    if (req.mask & kSetMode) a.mode = (a.mode & S_IFMT) | (req.mode & 07777);
    if (req.mask & kSetUid) a.uid = req.uid;
    if (req.mask & kSetGid) a.gid = req.gid;
    if (req.mask & kSetAtime) a.atime = req.atime;
    if (req.mask & kSetAtimeNow) a.atime = now;
    if (req.mask & kSetMtime) a.mtime = req.mtime;
    if (req.mask & kSetMtimeNow) a.mtime = now;
    if (req.mask & kSetCtime) {
      a.ctime = req.ctime;
    } else if (!(req.mask & kKeepTimes)) {
      a.ctime = now;
    }
    InodeAttr attr = a;
    STRIPEFS_RETURN_IF_ERROR(m.Commit());
    return attr;
  });
  if (result.ok() && obsolete) {
    obsolete->insert(obsolete->end(), dropped.begin(), dropped.end());
  }
  return result;
}

Status MetaStore::SetXattr(uint64_t ino, const std::string& name,
                           const std::string& value, uint32_t flags) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  if (value.size() > kXattrValueMax) {
    return Status(E2BIG, "xattr value of " + std::to_string(value.size()) +
                             " bytes is larger than 64 KiB");
  }
  if ((flags & ~(kXattrCreate | kXattrReplace)) != 0 ||
      flags == (kXattrCreate | kXattrReplace)) {
    return Status::InvalidArgument("unsupported xattr flags " +
                                   std::to_string(flags));
  }
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    std::string key = XattrKey(ino, name);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> old, m.txn().Get(key));
    if (old && (flags & kXattrCreate)) {
      return Status::Exists("xattr '" + name + "' already exists");
    }
    if (!old && (flags & kXattrReplace)) {
      return Status(ENODATA, "xattr '" + name + "' does not exist");
    }
    m.txn().Put(key, value);
    rec->attr.ctime = m.now();
    return m.Commit();
  });
}

Result<std::string> MetaStore::GetXattr(uint64_t ino, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  auto v = r.Get(XattrKey(ino, name), "xattr");
  if (!v.ok() && v.status().code() == ENOENT) {
    return Status(ENODATA, "xattr '" + name + "' does not exist");
  }
  return v;
}

Result<std::vector<std::string>> MetaStore::ListXattr(uint64_t ino) {
  SnapshotReader r(kv_.get());
  STRIPEFS_RETURN_IF_ERROR(r.Inode(ino).status());
  std::string prefix = XattrPrefix(ino);
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<KvPair> xattrs,
                            r.Range(prefix, PrefixEnd(prefix)));
  std::vector<std::string> out;
  for (const KvPair& p : xattrs) {
    STRIPEFS_ASSIGN_OR_RETURN(std::string name, ParseXattrName(p.key));
    out.push_back(std::move(name));
  }
  return out;
}

Status MetaStore::RemoveXattr(uint64_t ino, const std::string& name) {
  STRIPEFS_RETURN_IF_ERROR(ValidateXattrName(name));
  return MutateNamespace([&]() -> Status {
    Mutation m(this);
    STRIPEFS_ASSIGN_OR_RETURN(InodeRecord * rec, m.Modify(ino));
    std::string key = XattrKey(ino, name);
    STRIPEFS_ASSIGN_OR_RETURN(std::optional<std::string> old, m.txn().Get(key));
    if (!old) {
      return Status(ENODATA, "xattr '" + name + "' does not exist");
    }
    m.txn().Delete(key);
    rec->attr.ctime = m.now();
    return m.Commit();
  });
}

}  // namespace stripefs
