#include "fs/posix_acl.h"

#include <endian.h>
#include <sys/stat.h>

#include <cstring>

namespace stripefs::fs {
namespace {

using namespace fuse_abi;  // NOLINT: wire names

constexpr uint16_t kRwx = kAclRead | kAclWrite | kAclExecute;
// The kernel never sends more than a page (fs/fuse/acl.c).
constexpr size_t kMaxAclEntries =
    (4096 - sizeof(posix_acl_xattr_header)) / sizeof(posix_acl_xattr_entry);

Status Invalid(const std::string& why) {
  return Status::InvalidArgument("POSIX ACL: " + why);
}

// The kernel's order of tags (posix_acl_valid).
int TagRank(uint16_t tag) {
  switch (tag) {
    case kAclUserObj:
      return 0;
    case kAclUser:
      return 1;
    case kAclGroupObj:
      return 2;
    case kAclGroup:
      return 3;
    case kAclMask:
      return 4;
    case kAclOther:
      return 5;
    default:
      return -1;
  }
}

Status Validate(const std::vector<AclEntry>& es) {
  int counts[6] = {};
  int prev_rank = -1;
  uint32_t prev_id = 0;
  for (const AclEntry& e : es) {
    const int rank = TagRank(e.tag);
    if (rank < 0) return Invalid("unknown tag " + std::to_string(e.tag));
    if ((e.perm & ~kRwx) != 0)
      return Invalid("bad permissions " + std::to_string(e.perm));
    if (rank < prev_rank) return Invalid("entries out of order");
    const bool named = e.tag == kAclUser || e.tag == kAclGroup;
    if (named && rank == prev_rank && e.id <= prev_id)
      return Invalid("named entries out of order or repeated");
    if (!named && ++counts[rank] > 1) return Invalid("repeated entry");
    if (named) ++counts[rank];
    prev_rank = rank;
    prev_id = e.id;
  }
  if (counts[0] != 1 || counts[2] != 1 || counts[5] != 1)
    return Invalid("needs exactly one owner, group and other entry");
  if ((counts[1] || counts[3]) && counts[4] == 0)
    return Invalid("named entries need a mask entry");
  return Status::Ok();
}

AclEntry* Find(std::vector<AclEntry>& es, uint16_t tag) {
  for (auto& e : es)
    if (e.tag == tag) return &e;
  return nullptr;
}

}  // namespace

Result<PosixAcl> PosixAcl::Parse(std::span<const uint8_t> value) {
  posix_acl_xattr_header h{};
  if (value.size() < sizeof(h)) return Invalid("shorter than its header");
  std::memcpy(&h, value.data(), sizeof(h));
  if (le32toh(h.a_version) != kAclXattrVersion)
    return Invalid("version " + std::to_string(le32toh(h.a_version)));
  const size_t body = value.size() - sizeof(h);
  if (body % sizeof(posix_acl_xattr_entry) != 0)
    return Invalid("partial entry");
  const size_t n = body / sizeof(posix_acl_xattr_entry);
  if (n > kMaxAclEntries) return Invalid("too many entries");
  PosixAcl acl;
  acl.entries_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    posix_acl_xattr_entry w{};
    std::memcpy(&w, value.data() + sizeof(h) + i * sizeof(w), sizeof(w));
    AclEntry e{le16toh(w.e_tag), le16toh(w.e_perm), le32toh(w.e_id)};
    if (e.tag != kAclUser && e.tag != kAclGroup) e.id = kAclUndefinedId;
    acl.entries_.push_back(e);
  }
  STRIPEFS_RETURN_IF_ERROR(Validate(acl.entries_));
  return acl;
}

Result<PosixAcl> PosixAcl::Parse(const std::string& value) {
  return Parse(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(value.data()), value.size()));
}

PosixAcl PosixAcl::FromMode(uint32_t mode) {
  PosixAcl acl;
  acl.entries_ = {
      {kAclUserObj, static_cast<uint16_t>((mode >> 6) & kRwx)},
      {kAclGroupObj, static_cast<uint16_t>((mode >> 3) & kRwx)},
      {kAclOther, static_cast<uint16_t>(mode & kRwx)},
  };
  return acl;
}

std::string PosixAcl::Serialize() const {
  std::string out(sizeof(posix_acl_xattr_header) +
                      entries_.size() * sizeof(posix_acl_xattr_entry),
                  '\0');
  const posix_acl_xattr_header h{htole32(kAclXattrVersion)};
  std::memcpy(out.data(), &h, sizeof(h));
  size_t at = sizeof(h);
  for (const AclEntry& e : entries_) {
    const posix_acl_xattr_entry w{htole16(e.tag), htole16(e.perm),
                                  htole32(e.id)};
    std::memcpy(out.data() + at, &w, sizeof(w));
    at += sizeof(w);
  }
  return out;
}

uint32_t PosixAcl::ModeWithAcl(uint32_t mode) const {
  uint32_t perms = 0;
  const AclEntry* mask = nullptr;
  for (const AclEntry& e : entries_) {
    if (e.tag == kAclUserObj) perms |= uint32_t{e.perm} << 6;
    if (e.tag == kAclGroupObj) perms |= uint32_t{e.perm} << 3;
    if (e.tag == kAclOther) perms |= e.perm;
    if (e.tag == kAclMask) mask = &e;
  }
  if (mask) perms = (perms & ~uint32_t{S_IRWXG}) | (uint32_t{mask->perm} << 3);
  return (mode & ~uint32_t{S_IRWXU | S_IRWXG | S_IRWXO}) | perms;
}

bool PosixAcl::EquivalentToMode() const {
  for (const AclEntry& e : entries_) {
    if (e.tag == kAclUser || e.tag == kAclGroup || e.tag == kAclMask)
      return false;
  }
  return true;
}

void PosixAcl::Chmod(uint32_t mode) {
  if (AclEntry* e = Find(entries_, kAclUserObj))
    e->perm = static_cast<uint16_t>((mode >> 6) & kRwx);
  AclEntry* group = Find(entries_, kAclMask);
  if (!group) group = Find(entries_, kAclGroupObj);
  if (group) group->perm = static_cast<uint16_t>((mode >> 3) & kRwx);
  if (AclEntry* e = Find(entries_, kAclOther))
    e->perm = static_cast<uint16_t>(mode & kRwx);
}

void PosixAcl::CreateMask(uint32_t* mode_p) {
  uint32_t mode = *mode_p;
  AclEntry* group = Find(entries_, kAclMask);
  if (!group) group = Find(entries_, kAclGroupObj);
  for (AclEntry& e : entries_) {
    if (e.tag == kAclUserObj) {
      e.perm &= (mode >> 6) & kRwx;
      mode &= (uint32_t{e.perm} << 6) | ~uint32_t{S_IRWXU};
    } else if (e.tag == kAclOther) {
      e.perm &= mode & kRwx;
      mode &= e.perm | ~uint32_t{S_IRWXO};
    }
  }
  if (group) {
    group->perm &= (mode >> 3) & kRwx;
    mode &= (uint32_t{group->perm} << 3) | ~uint32_t{S_IRWXG};
  }
  *mode_p = mode;
}

namespace {

Status SetMode(MetaService& meta, uint64_t ino, uint32_t mode) {
  SetAttrRequest req;
  req.mask = kSetMode;
  req.mode = mode & 07777;
  std::vector<ObsoleteStripe> obsolete;  // a mode change frees no stripes
  auto a = meta.SetAttr(ino, req, &obsolete);
  return a.ok() ? Status::Ok() : a.status();
}

Status RemoveIfPresent(MetaService& meta, uint64_t ino,
                       const std::string& name) {
  Status st = meta.RemoveXattr(ino, name);
  return st.ok() || st.code() == ENODATA ? Status::Ok() : st;
}

// The parent's default ACL, if it has a valid one.
Result<std::optional<PosixAcl>> DefaultAclOf(MetaService& meta, uint64_t dir) {
  auto v = meta.GetXattr(dir, kAclDefaultXattr);
  if (!v.ok()) {
    if (v.status().code() == ENODATA) return std::optional<PosixAcl>();
    return v.status();
  }
  auto acl = PosixAcl::Parse(*v);
  if (!acl.ok()) return std::optional<PosixAcl>();  // stored before checks
  return std::optional<PosixAcl>(std::move(acl).value());
}

}  // namespace

Status SetAccessAcl(MetaService& meta, uint64_t ino,
                    std::span<const uint8_t> value, uint32_t xattr_flags,
                    uint32_t setxattr_flags) {
  STRIPEFS_ASSIGN_OR_RETURN(PosixAcl acl, PosixAcl::Parse(value));
  STRIPEFS_ASSIGN_OR_RETURN(InodeAttr a, meta.GetAttr(ino));
  uint32_t mode = acl.ModeWithAcl(a.mode);
  if (setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID) mode &= ~uint32_t{S_ISGID};
  if ((mode & 07777) != (a.mode & 07777))
    STRIPEFS_RETURN_IF_ERROR(SetMode(meta, ino, mode));
  if (acl.EquivalentToMode())
    return RemoveIfPresent(meta, ino, kAclAccessXattr);
  return meta.SetXattr(ino, kAclAccessXattr, acl.Serialize(), xattr_flags);
}

Status SetDefaultAcl(MetaService& meta, uint64_t ino,
                     std::span<const uint8_t> value, uint32_t xattr_flags) {
  STRIPEFS_ASSIGN_OR_RETURN(PosixAcl acl, PosixAcl::Parse(value));
  return meta.SetXattr(ino, kAclDefaultXattr, acl.Serialize(), xattr_flags);
}

Status ChmodAcl(MetaService& meta, uint64_t ino, uint32_t mode) {
  auto v = meta.GetXattr(ino, kAclAccessXattr);
  if (!v.ok()) return v.status().code() == ENODATA ? Status::Ok() : v.status();
  auto acl = PosixAcl::Parse(*v);
  if (!acl.ok()) return Status::Ok();  // not ours to rewrite
  acl->Chmod(mode);
  return meta.SetXattr(ino, kAclAccessXattr, acl->Serialize(), 0);
}

Result<InheritedAcl> InheritAcl(MetaService& meta, uint64_t parent,
                                uint32_t* mode, std::optional<uint32_t> umask) {
  InheritedAcl out;
  std::optional<PosixAcl> def;
  if (!S_ISLNK(*mode)) {
    STRIPEFS_ASSIGN_OR_RETURN(def, DefaultAclOf(meta, parent));
  }
  if (!def) {
    if (umask) *mode &= ~(*umask & 0777);
    return out;
  }
  PosixAcl access = *def;
  access.CreateMask(mode);
  if (!access.EquivalentToMode()) out.access = std::move(access);
  if (S_ISDIR(*mode)) out.default_ = std::move(def);
  return out;
}

Status StoreInheritedAcl(MetaService& meta, uint64_t ino,
                         const InheritedAcl& acl) {
  if (acl.access) {
    STRIPEFS_RETURN_IF_ERROR(
        meta.SetXattr(ino, kAclAccessXattr, acl.access->Serialize(), 0));
  }
  if (acl.default_) {
    STRIPEFS_RETURN_IF_ERROR(
        meta.SetXattr(ino, kAclDefaultXattr, acl.default_->Serialize(), 0));
  }
  return Status::Ok();
}

}  // namespace stripefs::fs
