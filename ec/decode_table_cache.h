// DecodeTableCache: a bounded LRU map from an erasure pattern to the ISA-L
// GF multiplication tables that reconstruct it.
//
// The key packs which chunks are read (sources) and which are rebuilt
// (outputs) as two 32-bit masks. Values are shared immutable tables, so a
// caller keeps using its tables even if they are evicted meanwhile.
// Thread-safety: all methods are safe to call concurrently (one mutex).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace stripefs::ec {

class DecodeTableCache {
 public:
  using Tables = std::shared_ptr<const std::vector<uint8_t>>;

  explicit DecodeTableCache(size_t capacity) : capacity_(capacity) {}

  static uint64_t Key(uint32_t source_mask, uint32_t output_mask) {
    return (uint64_t{source_mask} << 32) | output_mask;
  }

  // The cached tables for `key`, or null (counted as a miss).
  Tables Find(uint64_t key);
  void Insert(uint64_t key, Tables tables);

  uint64_t misses() const;
  size_t size() const;

 private:
  using Lru = std::list<std::pair<uint64_t, Tables>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;  // most recent first
  std::unordered_map<uint64_t, Lru::iterator> index_;
  uint64_t misses_ = 0;
};

}  // namespace stripefs::ec
