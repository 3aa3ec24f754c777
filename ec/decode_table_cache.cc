#include "ec/decode_table_cache.h"

namespace stripefs::ec {

DecodeTableCache::Tables DecodeTableCache::Find(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void DecodeTableCache::Insert(uint64_t key, Tables tables) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return;
  auto it = index_.find(key);
  if (it != index_.end()) {  // another thread built it too
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, std::move(tables));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

uint64_t DecodeTableCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

size_t DecodeTableCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace stripefs::ec
