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
//   - other clients' commits: the file system distrusts an inode when OPEN
//     (or any attribute fetch) finds its change marker moved (close-to-open;
//     its own commits move it too): readers then read the map again;
//   - a cached version that was replaced and collected meanwhile fails to
//     read; the reader then re-reads that stripe's map (Put).
// A Fill that started before a Forget or Distrust is dropped, and one that
// started before a commit leaves the committed stripe alone, so a map read
// before a commit never hides it.
//
// Memory: at most `max_stripes` cached versions plus ranges; past that the
// whole cache is dropped (simple and rare: 256 Ki stripes map 256 GiB with
// 1 MiB stripes). Thread-safety: all methods are thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/meta/meta_types.h"
#include "common/status.h"

namespace stripefs {

// Stripes one map miss reads from metadata (readers: not past EOF), so
// sequential readers and writers ask once per window.
inline constexpr uint64_t kStripeMapWindow = 256;

class StripeMapCache {
 public:
  explicit StripeMapCache(size_t max_stripes = size_t{1} << 18)
      : max_stripes_(max_stripes) {}

  // Who asks: a reader needs the map as metadata has it now (within the
  // contract); a writer's base only needs to be a version that was
  // committed, since its commit's CAS catches one that moved on.
  enum class Use { kRead, kWriteBase };
  // The committed versions of stripes [first, first + count) if that whole
  // range is known (sorted by stripe, holes omitted); false on a miss.
  bool Lookup(uint64_t ino, uint64_t first, uint64_t count,
              std::vector<StripeVersion>* out, Use use = Use::kRead);

  // Reads the map of stripes [first, first + count) (sorted, holes omitted):
  // from the cache when Lookup(use) knows it, else `read(first, window)`
  // (window >= count stripes from metadata, i.e. GetStripes), which is
  // recorded as Fill does. The one read-through of readers' maps and
  // writers' bases; a read error is returned and nothing is cached.
  using MapReader = std::function<Result<std::vector<StripeVersion>>(
      uint64_t first, uint64_t count)>;
  Result<std::vector<StripeVersion>> ReadThrough(uint64_t ino, uint64_t first,
                                                 uint64_t count,
                                                 uint64_t window, Use use,
                                                 const MapReader& read);

  // Token to pass to Fill: take it BEFORE reading the map from metadata.
  uint64_t BeginFill();
  // Records `found` (sorted, from GetStripes(ino, first, count)) as the map
  // of [first, first + count), unless something was forgotten or
  // distrusted since `token` was taken; stripes this client committed since
  // then keep their committed version.
  void Fill(uint64_t token, uint64_t ino, uint64_t first, uint64_t count,
            const std::vector<StripeVersion>& found);
  // Replaces one stripe's version (a re-read after a failed read).
  void Put(uint64_t token, uint64_t ino, const StripeVersion& sv);
  // This client committed `sv` (stripe lock held): the stripe's map is now
  // `sv`, known even if nothing else of `ino` is; fills begun before leave
  // this stripe alone (they may name the replaced version).
  void Committed(uint64_t ino, const StripeVersion& sv);

  // Drops everything cached about `ino` and voids fills in progress.
  void Forget(uint64_t ino);
  // Another client may have changed `ino` (close-to-open): readers miss
  // until a Fill reads its map again (which drops what was kept); writers
  // keep taking their bases from it. Voids fills in progress.
  void Distrust(uint64_t ino);

  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Entry {
    StripeVersion sv;
    uint64_t committed = 0;  // seq_ of this client's commit of sv; 0: read
  };
  struct InodeMap {
    std::map<uint64_t, uint64_t> known;  // start -> end (merged ranges)
    std::map<uint64_t, Entry> versions;
    bool distrusted = false;  // only writers' bases (Distrust)
  };
  void AddKnown(InodeMap& m, uint64_t a, uint64_t b);  // mu_ held
  // Sets stripe sv.stripe's entry unless this client committed it after
  // `token` (a map read before that commit must not hide it). mu_ held.
  void SetRead(InodeMap& m, uint64_t token, const StripeVersion& sv);

  const size_t max_stripes_;
  mutable std::mutex mu_;
  // Guarded by mu_: seq_ counts forgets, distrusts and commits (a fill's
  // token is its value at BeginFill); voided_ is seq_ at the last forget
  // or distrust: fills that began before it are dropped. A commit voids
  // no fill, it only keeps its own stripe from being overwritten by one.
  uint64_t seq_ = 0;
  uint64_t voided_ = 0;
  size_t stripes_ = 0;  // versions cached in all inodes
  std::unordered_map<uint64_t, InodeMap> inodes_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace stripefs
