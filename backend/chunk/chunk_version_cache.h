// ChunkVersionCache: the chunk store's in-memory copy of which versions the
// index holds for a chunk id (ChunkStore::GatherVersions' answer), so that
// the write and delete paths need not scan RocksDB for them on every call.
//
// Exactness: an entry is either absent or equal to what an index scan of
// that chunk id returns at that moment; the store keeps it so (see
// chunk_store.h, "Version cache"): a commit of the id's versions updates
// the entry under the chunk lock after the index write (ApplyPut /
// ApplyDelete), any other index write drops the ids it touched (Drop, or
// Clear when they are not known). A miss fills the entry from a scan only
// when nothing changed the shard in between: the caller takes a token
// (Token) before scanning and Fill installs only if the shard's generation
// still equals it (every update, drop and clear moves it on). A chunk id
// whose scan met an entry that does not decode is never cached (the scan
// path knows what to do with those).
//
// Bound: the entries' approximate bytes (key, versions, pieces, block
// CRCs, bookkeeping) stay under `capacity_bytes`, split evenly over the
// shards; each shard evicts its least recently used entries. An entry
// bigger than a shard's share is not cached. Nothing is persisted: a new
// cache (a newly opened store) is empty.
//
// Ownership: one per ChunkStore (ChunkStoreOptions::version_cache_bytes >
// 0), which alone decides when entries change; the cache knows nothing of
// RocksDB and never reads the index itself.
//
// Thread-safety: all methods may be called concurrently; each shard (picked
// by ChunkIdHash, the hash the store's chunk locks use) has its own mutex.
// Lookup hands an entry out without copying (shared_ptr<const>), and an
// entry handed out never changes: a change copies it, unless the cache
// holds its only reference (a new one needs the shard's mutex, held), and
// then changes it in place.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_service.h"

namespace stripefs {

// The hash of a chunk id shared by the chunk store's lock stripes and the
// version cache's shards.
struct ChunkIdHash {
  size_t operator()(const ChunkId& id) const {
    uint64_t h = id.inode * 0x9E3779B97F4A7C15ull;
    h ^= id.stripe * 0xC2B2AE3D27D4EB4Full;
    h ^= (static_cast<uint64_t>(id.index) + 1) * 0x165667B19E3779F9ull;
    h ^= h >> 31;
    return static_cast<size_t>(h);
  }
};

// The versions of one chunk id that decode, in version order.
using ChunkVersions = std::vector<std::pair<uint64_t, ChunkIndexValue>>;

struct ChunkVersionCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;  // entries dropped to stay under the bound
  uint64_t bytes = 0;      // approximate bytes of the entries held now
  uint64_t entries = 0;
};

class ChunkVersionCache {
 public:
  // At most 64 shards, each of at least 256 KiB (fewer for a smaller
  // capacity, down to one).
  static constexpr size_t kMaxShards = 64;
  static constexpr uint64_t kMinShardBytes = uint64_t{256} << 10;

  explicit ChunkVersionCache(uint64_t capacity_bytes);
  ChunkVersionCache(const ChunkVersionCache&) = delete;
  ChunkVersionCache& operator=(const ChunkVersionCache&) = delete;

  // The cached versions of `id` (counted as a hit), or nullptr (a miss).
  std::shared_ptr<const ChunkVersions> Lookup(const ChunkId& id);
  // Lookup without counting or touching the eviction order (checks).
  std::shared_ptr<const ChunkVersions> Peek(const ChunkId& id);
  // The generation of id's shard, to pass to Fill: take it before the scan.
  uint64_t Token(const ChunkId& id);
  // Installs `versions` (a scan's result) for `id` unless the shard
  // changed since `token` was taken or it does not fit a shard.
  void Fill(const ChunkId& id, uint64_t token, ChunkVersions versions);
  // After (id, v) for every v of `versions` was set to `encoded` (an
  // EncodeChunkValue) in the index (caller holds id's chunk lock): the
  // entry, if cached, gets its decoding (decoded only then; a value that
  // does not decode drops the entry).
  void ApplyPut(const ChunkId& id, std::span<const uint64_t> versions,
                std::string_view encoded);
  // After `versions` of `id` were deleted from the index (chunk lock held).
  void ApplyDelete(const ChunkId& id, std::span<const uint64_t> versions);
  // After an index write that changed `id` in another way: forgets it.
  void Drop(const ChunkId& id);
  // Forgets everything (an index write whose chunk ids are not known).
  void Clear();
  // Every cached entry (a copy of the pointers, for checks).
  std::vector<std::pair<ChunkId, std::shared_ptr<const ChunkVersions>>>
  Snapshot();

  ChunkVersionCacheCounters Counters() const;
  size_t shards() const { return shards_.size(); }
  uint64_t capacity_bytes() const { return capacity_bytes_; }

  // The bytes an entry of `id` with `versions` is accounted as.
  static uint64_t EntryBytes(const ChunkVersions& versions);

 private:
  struct Entry {
    ChunkId id;
    std::shared_ptr<ChunkVersions> versions;
    uint64_t bytes = 0;
  };
  struct Shard {
    std::mutex mu;
    uint64_t generation = 0;
    uint64_t bytes = 0;
    std::list<Entry> lru;  // most recently used first
    std::unordered_map<ChunkId, std::list<Entry>::iterator, ChunkIdHash> map;
  };

  Shard& ShardFor(const ChunkId& id);
  // Under s.mu: puts (or replaces) id's entry at the front, then evicts
  // from the back while the shard is over its share.
  void InstallLocked(Shard& s, const ChunkId& id,
                     std::shared_ptr<ChunkVersions> versions, uint64_t bytes);
  void EraseLocked(Shard& s, std::list<Entry>::iterator it);
  // Under s.mu: applies `change` to id's entry (to a copy when anyone but
  // the cache holds it; nothing when it is not cached; `change` returning
  // false drops it), and moves the generation on.
  template <typename Change>
  void ChangeLocked(Shard& s, const ChunkId& id, const Change& change);

  const uint64_t capacity_bytes_;
  uint64_t shard_bytes_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> entries_{0};
};

}  // namespace stripefs
