// SubtreeGuard: holds a client identity given `stripefs auth add --path
// /sub` to that subtree (docs/cluster.md "Identities"). metad's
// MetaServiceServer asks it about every inode number a limited client sends
// before the service runs the call.
//
// What "inside" means:
//  - a directory is inside when walking its '..' links (MetaService::Lookup
//    of "..", one point read per level) meets the subtree's root before the
//    volume's root; so a directory moved out by another identity is out at
//    once, and a forged directory number outside is refused;
//  - any other inode has no '..' (hard links may name it from several
//    directories), so it is inside when this client reached it through a
//    directory that was inside: a Lookup, ReadDir, create or Link answer.
//    Those numbers are remembered per identity in memory: a file number the
//    client did not get from this metad (forged, or from before a metad
//    restart) is refused with EACCES until it is looked up again by name,
//    and a file another identity moves out afterwards stays reachable by
//    number to this client (a known limit);
//  - the directories on the path from "/" to the subtree's root are
//    "on the way": a limited client may stat them (GetAttr, GetXattr,
//    ListXattr) and look up only the next component of its path in them, so
//    a mount of the whole volume can walk down to its subtree; it cannot
//    list, create, remove or rename there.
// The subtree's root is resolved by name from "/" on first use and again
// whenever a check fails (it may have been removed and created anew).
//
// Limits: at most kMaxReachedPerIdentity remembered inodes per identity
// (then the memory starts over, and the client looks its files up again).
// Thread-safety: all methods may be called concurrently (one mutex, never
// held across a MetaService call).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

inline constexpr size_t kMaxReachedPerIdentity = size_t{1} << 20;
// Deepest directory a walk follows before it refuses (a loop guard).
inline constexpr int kMaxSubtreeDepth = 4096;

class SubtreeGuard {
 public:
  // Does not own `service`; it must outlive the guard.
  explicit SubtreeGuard(MetaService* service) : service_(service) {}

  // One limited client's checks: `entity` limited to `path` (absolute,
  // not "/"; IdentityTable checked its form). Each check is OK or EACCES
  // naming the inode, the identity and its subtree.
  class Limit {
   public:
    Limit(SubtreeGuard* g, std::string entity, std::string path)
        : g_(g), entity_(std::move(entity)), path_(std::move(path)) {}
    // `dir` is the subtree's root or a directory below it.
    Status Dir(uint64_t dir) const;
    // `ino` (any type) is inside (see the file comment).
    Status Node(uint64_t ino) const;
    // Node(), or a directory on the way from "/" to the subtree (stat only).
    Status Visible(uint64_t ino) const;
    // Lookup(parent, name) answered `found`: its answer may go back if
    // `parent` is inside and `found` is too (".." of the subtree's root is
    // not), or `parent` is on the way and `found` is the next step of the
    // path (the inode is then remembered). A failed lookup's error goes back
    // only when the parent is inside, so names outside do not leak.
    Status Looked(uint64_t parent, const std::string& name,
                  const Result<InodeAttr>& found) const;
    // The client got this inode from inside (a create, ReadDir entry, Link).
    void Reached(uint64_t ino) const;
    const std::string& entity() const { return entity_; }

   private:
    Status Refuse(uint64_t ino, const char* what) const;
    SubtreeGuard* g_;
    std::string entity_;
    std::string path_;
  };

  // Forgets what `entity` reached (its identity was removed or changed).
  void Forget(const std::string& entity) STRIPEFS_EXCLUDES(mu_);

 private:
  struct Scope {
    std::string path;
    uint64_t root = 0;             // 0: not resolved yet
    std::vector<uint64_t> on_way;  // "/" .. parent of root
    std::unordered_set<uint64_t> reached;
  };
  struct Resolved {
    uint64_t root = 0;
    std::vector<uint64_t> on_way;
  };
  // The subtree's root and the directories on the way (cached; `fresh`
  // resolves again by name).
  Result<Resolved> Resolve(const std::string& entity, const std::string& path,
                           bool fresh) STRIPEFS_EXCLUDES(mu_);
  Result<Resolved> ResolveByName(const std::string& path);
  // OK(true) if directory `dir` lies under `root`; ENOTDIR if `dir` is not
  // a directory; other errors as the service's.
  Result<bool> Under(uint64_t dir, uint64_t root);
  bool WasReached(const std::string& entity, const std::string& path,
                  uint64_t ino) STRIPEFS_EXCLUDES(mu_);
  void Remember(const std::string& entity, const std::string& path,
                uint64_t ino) STRIPEFS_EXCLUDES(mu_);
  Scope& ScopeLocked(const std::string& entity, const std::string& path)
      STRIPEFS_REQUIRES(mu_);

  MetaService* const service_;
  Mutex mu_;
  std::unordered_map<std::string, Scope> scopes_ STRIPEFS_GUARDED_BY(mu_);
};

}  // namespace stripefs::rpc
