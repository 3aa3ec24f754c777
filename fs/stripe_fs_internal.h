// Helpers shared by StripeFs's source files (stripe_fs.cc: attributes,
// data, nodes; stripe_fs_namespace.cc: creates, links, unlinks, renames).
// Private to fs/stripe_fs*.cc. Stateless; thread-safe.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>

#include "backend/meta/meta_service.h"
#include "fs/posix_acl.h"
#include "fuse/raw_file_system.h"

namespace stripefs::fs::internal {

// CLOCK_REALTIME, as the kernel stamps times.
inline Timespec RealNow() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return {static_cast<int64_t>(ts.tv_sec), static_cast<uint32_t>(ts.tv_nsec)};
}

inline void SplitTimeout(std::chrono::nanoseconds t, uint64_t* sec,
                         uint32_t* nsec) {
  *sec = static_cast<uint64_t>(t.count() / 1000000000);
  *nsec = static_cast<uint32_t>(t.count() % 1000000000);
}

// Owner and mode of a new inode in `parent` (BSD group semantics of setgid
// directories).
struct NewOwner {
  uint32_t uid, gid, mode;
};
inline NewOwner OwnerFor(MetaService& meta, uint64_t parent,
                         const fuse::Replier& r, uint32_t mode) {
  NewOwner o{r.ctx().uid, r.ctx().gid, mode};
  auto p = meta.GetAttr(parent);
  if (p.ok() && (p->mode & S_ISGID)) {
    o.gid = p->gid;
    if (S_ISDIR(mode)) o.mode |= S_ISGID;
  }
  return o;
}

// The new inode's mode after the umask (when the kernel left it to us) or
// its parent's default ACL, and the ACLs to store on it (posix_acl.h).
inline Result<InheritedAcl> NewInodeAcl(MetaService& meta, uint64_t parent,
                                        NewOwner* o, uint32_t umask,
                                        bool dont_mask) {
  return InheritAcl(meta, parent, &o->mode,
                    dont_mask ? std::optional<uint32_t>(umask) : std::nullopt);
}

}  // namespace stripefs::fs::internal
