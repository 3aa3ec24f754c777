#include "backend/client/stripe_map_cache.h"

#include <algorithm>

namespace stripefs {

bool StripeMapCache::Lookup(uint64_t ino, uint64_t first, uint64_t count,
                            std::vector<StripeVersion>* out, Use use) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = inodes_.find(ino);
  const uint64_t end = first + count;
  bool known = false;
  if (it != inodes_.end() && !(it->second.distrusted && use == Use::kRead)) {
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
    out->push_back(s->second.sv);
  return true;
}

Result<std::vector<StripeVersion>> StripeMapCache::ReadThrough(
    uint64_t ino, uint64_t first, uint64_t count, uint64_t window, Use use,
    const MapReader& read) {
  std::vector<StripeVersion> found;
  if (Lookup(ino, first, count, &found, use)) return found;
  window = std::max(window, count);
  const uint64_t token = BeginFill();
  STRIPEFS_ASSIGN_OR_RETURN(found, read(first, window));
  Fill(token, ino, first, window, found);
  std::erase_if(found, [end = first + count](const StripeVersion& sv) {
    return sv.stripe >= end;
  });
  return found;
}

uint64_t StripeMapCache::BeginFill() {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
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

void StripeMapCache::SetRead(InodeMap& m, uint64_t token,
                             const StripeVersion& sv) {
  auto [it, added] = m.versions.try_emplace(sv.stripe);
  if (added) {
    ++stripes_;
  } else if (it->second.committed > token) {
    return;
  }
  it->second = Entry{sv, 0};
}

void StripeMapCache::Fill(uint64_t token, uint64_t ino, uint64_t first,
                          uint64_t count,
                          const std::vector<StripeVersion>& found) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token < voided_ || count == 0) return;
  if (stripes_ + found.size() > max_stripes_) {
    inodes_.clear();  // over the bound: start again
    stripes_ = 0;
  }
  InodeMap& m = inodes_[ino];
  if (m.distrusted) {
    // What was kept may be stale for readers: start again, but with the
    // commits newer than this fill.
    InodeMap kept;
    for (const auto& [stripe, e] : m.versions) {
      if (e.committed <= token) continue;
      kept.versions.emplace(stripe, e);
      AddKnown(kept, stripe, stripe + 1);
    }
    stripes_ -= m.versions.size() - kept.versions.size();
    m = std::move(kept);
  }
  const uint64_t end = first + count;
  for (auto s = m.versions.lower_bound(first);
       s != m.versions.end() && s->first < end;) {
    if (s->second.committed > token) {
      ++s;  // committed after the fill began: newer than what it read
      continue;
    }
    s = m.versions.erase(s);
    --stripes_;
  }
  for (const StripeVersion& sv : found) {
    if (sv.stripe < first || sv.stripe >= end) continue;
    SetRead(m, token, sv);
  }
  AddKnown(m, first, end);
}

void StripeMapCache::Put(uint64_t token, uint64_t ino,
                         const StripeVersion& sv) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token < voided_) return;
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;  // only refresh what is cached
  SetRead(it->second, token, sv);
}

void StripeMapCache::Committed(uint64_t ino, const StripeVersion& sv) {
  std::lock_guard<std::mutex> lock(mu_);
  ++seq_;
  if (stripes_ + 1 > max_stripes_) {
    inodes_.clear();  // over the bound: start again
    stripes_ = 0;
  }
  InodeMap& m = inodes_[ino];
  auto [it, added] = m.versions.insert_or_assign(sv.stripe, Entry{sv, seq_});
  (void)it;
  if (added) ++stripes_;
  AddKnown(m, sv.stripe, sv.stripe + 1);
}

void StripeMapCache::Distrust(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  voided_ = ++seq_;
  auto it = inodes_.find(ino);
  if (it != inodes_.end()) it->second.distrusted = true;
}

void StripeMapCache::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  voided_ = ++seq_;
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
