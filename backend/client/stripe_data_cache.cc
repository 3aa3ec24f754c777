#include "backend/client/stripe_data_cache.h"

namespace stripefs {

void StripeDataCache::Allocate(CachedStripe* c, size_t n) {
  if (n <= buffers_.buffer_size()) {
    c->pooled = buffers_.Get();
  } else {
    c->own = std::make_unique_for_overwrite<uint8_t[]>(n);
  }
}

std::optional<StripeDataCache::Load> StripeDataCache::Find(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.load;
}

bool StripeDataCache::EvictOne() {
  for (auto k = lru_.rbegin(); k != lru_.rend(); ++k) {
    auto it = entries_.find(*k);
    if (!it->second.done) continue;
    used_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
    return true;
  }
  return false;
}

std::shared_ptr<std::promise<CachedStripePtr>> StripeDataCache::Reserve(
    const Key& key, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > budget_ || entries_.count(key)) return nullptr;
  while (used_ + bytes > budget_) {
    if (!EvictOne()) return nullptr;
  }
  auto p = std::make_shared<std::promise<CachedStripePtr>>();
  lru_.push_front(key);
  Entry e;
  e.load = p->get_future().share();
  e.bytes = bytes;
  e.lru = lru_.begin();
  entries_.emplace(key, std::move(e));
  used_ += bytes;
  return p;
}

void StripeDataCache::Complete(
    const Key& key, const std::shared_ptr<std::promise<CachedStripePtr>>& p,
    CachedStripePtr data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (data) {
        it->second.done = true;
      } else {
        used_ -= it->second.bytes;
        lru_.erase(it->second.lru);
        entries_.erase(it);
      }
    }
  }
  p->set_value(std::move(data));  // wakes the waiting readers
}

uint64_t StripeDataCache::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

}  // namespace stripefs
