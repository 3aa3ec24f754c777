// StripeDataCache: whole stripes' data, read once and kept for the readers
// that follow: stripes read ahead of sequential readers, and degraded
// stripes (a data chunk's server down or the chunk known missing), which
// are reconstructed once instead of once per READ.
//
// Keyed by (inode, stripe, version): a committed version's bytes never
// change (a write makes a new version), so an entry is valid as long as the
// stripe map that named its version is; no invalidation is needed.
//
// An entry is reserved (Reserve) before its stripe is read and completed
// (Complete) when the read ends; readers that find it meanwhile wait for
// that one read (Find + Wait) instead of starting their own.
//
// Memory: reserved plus completed entries hold at most `budget_bytes`
// (the per-mount budget, StripeClientOptions::read_cache_bytes); Reserve
// evicts completed entries, least recently used first, and fails when the
// budget is held by reads in flight. Thread-safety: thread-safe (one mutex;
// waiting happens outside it).
#pragma once

#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace stripefs {

// The stored data columns of one stripe version: data cell i's columns
// [0, chunk_len) at bytes [i * chunk_len, (i + 1) * chunk_len). The buffer
// is allocated without zeroing (every byte is read into it before it is
// published): a 1 MiB stripe costs no 1 MiB memset.
struct CachedStripe {
  uint32_t chunk_len = 0;
  std::unique_ptr<uint8_t[]> bytes;
  void Allocate(size_t n) {
    bytes = std::make_unique_for_overwrite<uint8_t[]>(n);
  }
};
using CachedStripePtr = std::shared_ptr<const CachedStripe>;

class StripeDataCache {
 public:
  struct Key {
    uint64_t ino = 0, stripe = 0, version = 0;
    friend auto operator<=>(const Key&, const Key&) = default;
  };
  // A load shared by every reader of the entry; null once done = failed.
  using Load = std::shared_future<CachedStripePtr>;

  explicit StripeDataCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  uint64_t budget() const { return budget_; }
  // The entry of `key` (loading or loaded), if any; refreshes its LRU rank.
  std::optional<Load> Find(const Key& key);
  // Creates a loading entry of `bytes` for `key` and returns the promise
  // to complete; null if the entry exists or the budget is held by loads.
  std::shared_ptr<std::promise<CachedStripePtr>> Reserve(const Key& key,
                                                         uint64_t bytes);
  // Completes the load of `key` with `data` (null: the read failed, the
  // entry is dropped so the next reader tries again).
  void Complete(const Key& key,
                const std::shared_ptr<std::promise<CachedStripePtr>>& p,
                CachedStripePtr data);

  uint64_t used() const;  // bytes reserved or held

 private:
  struct Entry {
    Load load;
    uint64_t bytes = 0;
    bool done = false;
    std::list<Key>::iterator lru;
  };
  bool EvictOne();  // mu_ held; false if nothing completed to evict

  const uint64_t budget_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // front: most recently used
};

}  // namespace stripefs
