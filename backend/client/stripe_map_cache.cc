#include "backend/client/stripe_map_cache.h"

#include <algorithm>

namespace stripefs {

bool StripeMapCache::Lookup(uint64_t ino, uint64_t first, uint64_t count,
                            std::vector<StripeVersion>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inodes_.find(ino);
  const uint64_t end = first + count;
  bool known = false;
  if (it != inodes_.end()) {
    const auto& k = it->second.known;
    auto r = k.upper_bound(first);  // first range starting past `first`
    if (r != k.begin()) {
      --r;
      known = r->first <= first && r->second >= end;
    }
  }
  if (!known) {
    ++misses_;
    return false;
  }
  ++hits_;
  out->clear();
  const auto& v = it->second.versions;
  for (auto s = v.lower_bound(first); s != v.end() && s->first < end; ++s)
    out->push_back(s->second);
  return true;
}

uint64_t StripeMapCache::BeginFill() {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

void StripeMapCache::AddKnown(InodeMap& m, uint64_t a, uint64_t b) {
  auto& k = m.known;
  // Merge with every range that touches [a, b).
  auto it = k.upper_bound(a);
  if (it != k.begin() && std::prev(it)->second >= a) --it;
  while (it != k.end() && it->first <= b) {
    a = std::min(a, it->first);
    b = std::max(b, it->second);
    it = k.erase(it);
  }
  k.emplace(a, b);
}

void StripeMapCache::Fill(uint64_t token, uint64_t ino, uint64_t first,
                          uint64_t count,
                          const std::vector<StripeVersion>& found) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token != epoch_ || count == 0) return;
  if (stripes_ + found.size() > max_stripes_) {
    inodes_.clear();  // over the bound: start again
    stripes_ = 0;
  }
  InodeMap& m = inodes_[ino];
  const uint64_t end = first + count;
  for (auto s = m.versions.lower_bound(first);
       s != m.versions.end() && s->first < end;) {
    s = m.versions.erase(s);
    --stripes_;
  }
  for (const StripeVersion& sv : found) {
    if (sv.stripe < first || sv.stripe >= end) continue;
    if (m.versions.insert_or_assign(sv.stripe, sv).second) ++stripes_;
  }
  AddKnown(m, first, end);
}

void StripeMapCache::Put(uint64_t token, uint64_t ino,
                         const StripeVersion& sv) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token != epoch_) return;
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;  // only refresh what is cached
  if (it->second.versions.insert_or_assign(sv.stripe, sv).second) ++stripes_;
}

void StripeMapCache::Committed(uint64_t ino, const StripeVersion& sv) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  if (stripes_ + 1 > max_stripes_) {
    inodes_.clear();  // over the bound: start again
    stripes_ = 0;
  }
  InodeMap& m = inodes_[ino];
  if (m.versions.insert_or_assign(sv.stripe, sv).second) ++stripes_;
  AddKnown(m, sv.stripe, sv.stripe + 1);
}

void StripeMapCache::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  stripes_ -= it->second.versions.size();
  inodes_.erase(it);
}

uint64_t StripeMapCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t StripeMapCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace stripefs
