// StripeMapCache: the client's copy of the stripe map (stripe -> committed
// StripeVersion) of the files it reads, so that a READ of a stripe whose
// map is cached makes no metadata call.
//
// What is cached: per inode, ranges of stripe numbers whose map was read
// from metadata (Fill), with the versions found there; a stripe inside a
// known range but without a version is a hole.
//
// Validity (the contract, see docs/filesystem.md "Client caches"):
//   - this client's own commits: a committed write names its new version
//     here (Committed, under the stripe's lock); a failed write or a
//     truncate forgets the inode (Forget);
//   - the writer's base: a write takes the stripe's current version from
//     here when known; if another client committed meanwhile, the commit's
//     CAS fails (ESTALE) and the writer forgets the inode and starts over;
//   - other clients' commits: the file system forgets an inode when OPEN
//     (or any attribute fetch) finds its change marker moved (close-to-open);
//   - a cached version that was replaced and collected meanwhile fails to
//     read; the reader then re-reads that stripe's map (Put).
// A Fill that started before a Forget is dropped (the epoch check), so a
// map read before a commit never lands after the commit's Forget.
//
// Memory: at most `max_stripes` cached versions plus ranges; past that the
// whole cache is dropped (simple and rare: 256 Ki stripes map 256 GiB with
// 1 MiB stripes). Thread-safety: all methods are thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/meta/meta_types.h"

namespace stripefs {

// Stripes one map miss reads from metadata (readers: not past EOF), so
// sequential readers and writers ask once per window.
inline constexpr uint64_t kStripeMapWindow = 256;

class StripeMapCache {
 public:
  explicit StripeMapCache(size_t max_stripes = size_t{1} << 18)
      : max_stripes_(max_stripes) {}

  // The committed versions of stripes [first, first + count) if that whole
  // range is known (sorted by stripe, holes omitted); false on a miss.
  bool Lookup(uint64_t ino, uint64_t first, uint64_t count,
              std::vector<StripeVersion>* out);

  // Token to pass to Fill: take it BEFORE reading the map from metadata.
  uint64_t BeginFill();
  // Records `found` (sorted, from GetStripes(ino, first, count)) as the map
  // of [first, first + count), unless something was forgotten since
  // `token` was taken.
  void Fill(uint64_t token, uint64_t ino, uint64_t first, uint64_t count,
            const std::vector<StripeVersion>& found);
  // Replaces one stripe's version (a re-read after a failed read).
  void Put(uint64_t token, uint64_t ino, const StripeVersion& sv);
  // This client committed `sv` (stripe lock held): the stripe's map is now
  // `sv`, known even if nothing else of `ino` is; fills begun before are
  // dropped (they may name the replaced version).
  void Committed(uint64_t ino, const StripeVersion& sv);

  // Drops everything cached about `ino` and voids fills in progress.
  void Forget(uint64_t ino);

  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct InodeMap {
    std::map<uint64_t, uint64_t> known;  // start -> end (merged ranges)
    std::map<uint64_t, StripeVersion> versions;
  };
  void AddKnown(InodeMap& m, uint64_t a, uint64_t b);  // mu_ held

  const size_t max_stripes_;
  mutable std::mutex mu_;
  uint64_t epoch_ = 0;  // bumped by Forget; guarded by mu_
  size_t stripes_ = 0;  // versions cached in all inodes
  std::unordered_map<uint64_t, InodeMap> inodes_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace stripefs
