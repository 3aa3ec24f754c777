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
// budget is held by reads in flight. Stripe buffers of up to `stripe_bytes`
// come from a pool (Allocate) that keeps up to kIdleStripeBuffers released
// ones beyond the budget: a fresh 1 MiB allocation was mmap'd memory that
// the socket receive into it faulted in and the kernel zeroed page by page
// (~10 % of the mount daemon's samples in a 1 MiB sequential read).
// Thread-safety: thread-safe (one mutex; waiting happens outside it).
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

#include "common/buffer_pool.h"

namespace stripefs {

// The stored data columns of one stripe version: data cell i's columns
// [0, chunk_len) at bytes [i * chunk_len, (i + 1) * chunk_len). The buffer
// (StripeDataCache::Allocate) holds unspecified bytes until every byte is
// read into it, before it is published: no memset.
struct CachedStripe {
  uint32_t chunk_len = 0;
  BufferPool::Lease pooled;        // a pool buffer, or
  std::unique_ptr<uint8_t[]> own;  // larger than the pool's buffers
  uint8_t* bytes() const { return pooled.empty() ? own.get() : pooled.data(); }
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

  // Released stripe buffers kept for reuse (beyond the budget).
  static constexpr size_t kIdleStripeBuffers = 8;

  // `stripe_bytes`: the size of the pooled buffers (a full stripe's data).
  StripeDataCache(uint64_t budget_bytes, size_t stripe_bytes)
      : budget_(budget_bytes), buffers_(stripe_bytes, kIdleStripeBuffers) {}

  uint64_t budget() const { return budget_; }
  // Gives `c` a buffer of at least `n` bytes (unspecified contents).
  void Allocate(CachedStripe* c, size_t n);
  const BufferPool& buffers() const { return buffers_; }
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
  BufferPool buffers_;  // thread-safe itself
  mutable std::mutex mu_;
  uint64_t used_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // front: most recently used
};

}  // namespace stripefs
