// POSIX ACLs of StripeFs, kept the way the kernel expects once FUSE_POSIX_ACL
// is negotiated (fs/fuse/acl.c): the kernel checks permissions itself with
// the ACLs it reads through GETXATTR, and leaves to the file system what
// its own file systems do in fs/posix_acl.c:
//   - an access ACL written (SETXATTR system.posix_acl_access) sets the
//     mode's permission bits (group bits = the mask entry); an ACL that says
//     no more than the mode is not stored (posix_acl_update_mode), and
//     FUSE_SETXATTR_ACL_KILL_SGID clears the setgid bit;
//   - chmod (SETATTR mode) rewrites the owner, mask (or group) and other
//     entries of the access ACL (posix_acl_chmod);
//   - a new inode in a directory with a default ACL gets it as its access
//     ACL masked by the create mode, directories also as their default ACL,
//     and the umask is not applied (posix_acl_create); elsewhere the umask
//     is applied (the mount asks for FUSE_DONT_MASK).
//
// PosixAcl is a value: the decoded xattr (bounds-checked, validated as
// posix_acl_valid does; fuzzed by tests/fs/fuzz_posix_acl). The functions
// below apply the rules through a MetaService. Each is a few metadata
// calls, not one transaction: a crash between them leaves the mode at most
// as permissive as the ACL (the mode is written first), never more.
// Thread-safety: values; the functions are as safe as the MetaService.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "fuse/fuse_abi.h"

namespace stripefs::fs {

struct AclEntry {
  uint16_t tag = 0;   // fuse_abi::kAclUserObj ...
  uint16_t perm = 0;  // rwx bits
  uint32_t id = fuse_abi::kAclUndefinedId;
  bool operator==(const AclEntry&) const = default;
};

class PosixAcl {
 public:
  // EINVAL unless `value` is a well-formed version-2 ACL: whole entries,
  // known tags and perms, one owner/group/other entry, a mask when there
  // are named entries, entries sorted by tag then id, no duplicates.
  static Result<PosixAcl> Parse(std::span<const uint8_t> value);
  static Result<PosixAcl> Parse(const std::string& value);
  // The three entries that say exactly `mode`.
  static PosixAcl FromMode(uint32_t mode);
  std::string Serialize() const;

  // The mode with its permission bits taken from the ACL (group bits from
  // the mask when there is one); other bits of `mode` kept.
  uint32_t ModeWithAcl(uint32_t mode) const;
  // True when the ACL holds nothing the mode bits cannot say.
  bool EquivalentToMode() const;
  // chmod: owner, mask (or group) and other entries follow `mode`.
  void Chmod(uint32_t mode);
  // New inode: entries masked by `*mode`, and `*mode` masked by them.
  void CreateMask(uint32_t* mode);

  const std::vector<AclEntry>& entries() const { return entries_; }

 private:
  std::vector<AclEntry> entries_;
};

// SETXATTR system.posix_acl_access: validates, sets the mode (clearing
// setgid when `setxattr_flags` has FUSE_SETXATTR_ACL_KILL_SGID), and stores
// the ACL unless the mode says it all (then a stored one is removed).
Status SetAccessAcl(MetaService& meta, uint64_t ino,
                    std::span<const uint8_t> value, uint32_t xattr_flags,
                    uint32_t setxattr_flags);
// SETXATTR system.posix_acl_default: validated, then stored as is.
Status SetDefaultAcl(MetaService& meta, uint64_t ino,
                     std::span<const uint8_t> value, uint32_t xattr_flags);
// After a chmod to `mode`: the stored access ACL follows it (none: no-op).
Status ChmodAcl(MetaService& meta, uint64_t ino, uint32_t mode);

// What a new inode inherits from its parent's default ACL.
struct InheritedAcl {
  std::optional<PosixAcl> access;    // store as system.posix_acl_access
  std::optional<PosixAcl> default_;  // directories: the parent's default
};
// Decides a new inode's mode (`*mode`: type and requested permissions, the
// umask not yet applied when `umask` is set) and the ACLs it inherits from
// `parent`. Symlinks inherit nothing.
Result<InheritedAcl> InheritAcl(MetaService& meta, uint64_t parent,
                                uint32_t* mode, std::optional<uint32_t> umask);
// Stores what InheritAcl returned on the new inode `ino`.
Status StoreInheritedAcl(MetaService& meta, uint64_t ino,
                         const InheritedAcl& acl);

}  // namespace stripefs::fs
