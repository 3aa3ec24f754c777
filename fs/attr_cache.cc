#include "fs/attr_cache.h"

namespace stripefs::fs {

namespace {

bool SameMarker(const InodeAttr& a, const InodeAttr& b) {
  return a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime;
}

}  // namespace

std::optional<InodeAttr> AttrCache::Get(uint64_t ino) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attrs_.find(ino);
  if (it == attrs_.end()) return std::nullopt;
  return it->second;
}

uint64_t AttrCache::BeginFetch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

bool AttrCache::Update(uint64_t token, const InodeAttr& fresh) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attrs_.find(fresh.ino);
  const bool changed = it == attrs_.end() || !SameMarker(it->second, fresh);
  if (token != epoch_) return true;  // raced with an own change: don't keep
  if (it != attrs_.end()) {
    it->second = fresh;
  } else {
    if (attrs_.size() >= max_entries_) attrs_.clear();
    attrs_.emplace(fresh.ino, fresh);
  }
  return changed;
}

void AttrCache::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  attrs_.erase(ino);
}

size_t AttrCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attrs_.size();
}

}  // namespace stripefs::fs
