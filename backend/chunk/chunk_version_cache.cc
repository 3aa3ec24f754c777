#include "backend/chunk/chunk_version_cache.h"

#include <algorithm>

namespace stripefs {

ChunkVersionCache::ChunkVersionCache(uint64_t capacity_bytes)
    : capacity_bytes_(capacity_bytes) {
  const size_t n = static_cast<size_t>(
      std::clamp<uint64_t>(capacity_bytes / kMinShardBytes, 1, kMaxShards));
  shard_bytes_ = capacity_bytes / n;
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>());
}

uint64_t ChunkVersionCache::EntryBytes(const ChunkVersions& versions) {
  // The list node, the map node and bucket, the vector, per version its
  // pair and the heap blocks of its vectors.
  uint64_t n = sizeof(Entry) + 3 * sizeof(void*) + 2 * sizeof(void*) +
               sizeof(ChunkVersions) + 64;
  for (const auto& [version, v] : versions) {
    n += sizeof(versions[0]) + v.block_crcs.capacity() * sizeof(uint32_t) +
         v.pieces.capacity() * sizeof(ChunkPiece);
  }
  return n;
}

ChunkVersionCache::Shard& ChunkVersionCache::ShardFor(const ChunkId& id) {
  return *shards_[ChunkIdHash()(id) % shards_.size()];
}

std::shared_ptr<const ChunkVersions> ChunkVersionCache::Lookup(
    const ChunkId& id) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(id);
  if (it == s.map.end()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->versions;
}

std::shared_ptr<const ChunkVersions> ChunkVersionCache::Peek(
    const ChunkId& id) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(id);
  return it == s.map.end() ? nullptr : it->second->versions;
}

uint64_t ChunkVersionCache::Token(const ChunkId& id) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  return s.generation;
}

void ChunkVersionCache::Fill(const ChunkId& id, uint64_t token,
                             ChunkVersions versions) {
  const uint64_t bytes = EntryBytes(versions);
  if (bytes > shard_bytes_) return;
  auto shared = std::make_shared<ChunkVersions>(std::move(versions));
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  // Something changed the shard (perhaps this id) since the scan began:
  // the scan may predate it.
  if (s.generation != token) return;
  InstallLocked(s, id, std::move(shared), bytes);
}

void ChunkVersionCache::InstallLocked(Shard& s, const ChunkId& id,
                                      std::shared_ptr<ChunkVersions> versions,
                                      uint64_t bytes) {
  auto it = s.map.find(id);
  if (it != s.map.end()) EraseLocked(s, it->second);
  s.lru.push_front(Entry{id, std::move(versions), bytes});
  s.map.emplace(id, s.lru.begin());
  s.bytes += bytes;
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  entries_.fetch_add(1, std::memory_order_relaxed);
  while (s.bytes > shard_bytes_ && !s.lru.empty()) {
    EraseLocked(s, std::prev(s.lru.end()));
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ChunkVersionCache::EraseLocked(Shard& s, std::list<Entry>::iterator it) {
  s.bytes -= it->bytes;
  bytes_.fetch_sub(it->bytes, std::memory_order_relaxed);
  entries_.fetch_sub(1, std::memory_order_relaxed);
  s.map.erase(it->id);
  s.lru.erase(it);
}

template <typename Change>
void ChunkVersionCache::ChangeLocked(Shard& s, const ChunkId& id,
                                     const Change& change) {
  ++s.generation;
  auto it = s.map.find(id);
  if (it == s.map.end()) return;
  // The only reference is the cache's: nobody can take one (that needs
  // s.mu), so the change goes in place instead of into a copy of every
  // version's pieces and block CRCs (~3 % of a chunkd's CPU in 4 KiB
  // random writes).
  std::shared_ptr<ChunkVersions> next =
      it->second->versions.use_count() == 1
          ? it->second->versions
          : std::make_shared<ChunkVersions>(*it->second->versions);
  const bool keep = change(next.get());
  const uint64_t bytes = EntryBytes(*next);
  if (!keep || bytes > shard_bytes_) {
    EraseLocked(s, it->second);
    return;
  }
  InstallLocked(s, id, std::move(next), bytes);
}

void ChunkVersionCache::ApplyPut(const ChunkId& id,
                                 std::span<const uint64_t> versions,
                                 std::string_view encoded) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  ChangeLocked(s, id, [&](ChunkVersions* vs) {
    auto decoded = DecodeChunkValue(encoded);
    if (!decoded.ok()) return false;  // scans skip it: not cacheable
    const ChunkIndexValue& value = *decoded;
    for (uint64_t v : versions) {
      auto at = std::lower_bound(
          vs->begin(), vs->end(), v,
          [](const auto& e, uint64_t want) { return e.first < want; });
      if (at != vs->end() && at->first == v) {
        at->second = value;
      } else {
        vs->insert(at, {v, value});
      }
    }
    return true;
  });
}

void ChunkVersionCache::ApplyDelete(const ChunkId& id,
                                    std::span<const uint64_t> versions) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  ChangeLocked(s, id, [&](ChunkVersions* vs) {
    std::erase_if(*vs, [&](const auto& e) {
      return std::find(versions.begin(), versions.end(), e.first) !=
             versions.end();
    });
    return true;
  });
}

void ChunkVersionCache::Drop(const ChunkId& id) {
  Shard& s = ShardFor(id);
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.generation;
  auto it = s.map.find(id);
  if (it != s.map.end()) EraseLocked(s, it->second);
}

void ChunkVersionCache::Clear() {
  for (auto& sp : shards_) {
    Shard& s = *sp;
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.generation;
    while (!s.lru.empty()) EraseLocked(s, s.lru.begin());
  }
}

std::vector<std::pair<ChunkId, std::shared_ptr<const ChunkVersions>>>
ChunkVersionCache::Snapshot() {
  std::vector<std::pair<ChunkId, std::shared_ptr<const ChunkVersions>>> out;
  for (auto& sp : shards_) {
    std::lock_guard<std::mutex> lock(sp->mu);
    for (const Entry& e : sp->lru) out.emplace_back(e.id, e.versions);
  }
  return out;
}

ChunkVersionCacheCounters ChunkVersionCache::Counters() const {
  ChunkVersionCacheCounters c;
  c.hits = hits_.load(std::memory_order_relaxed);
  c.misses = misses_.load(std::memory_order_relaxed);
  c.evictions = evictions_.load(std::memory_order_relaxed);
  c.bytes = bytes_.load(std::memory_order_relaxed);
  c.entries = entries_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace stripefs
