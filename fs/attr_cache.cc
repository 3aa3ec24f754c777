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
  return it->second.attr;
}

uint64_t AttrCache::BeginFetch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

bool AttrCache::Update(uint64_t token, const InodeAttr& fresh,
                       std::optional<uint64_t>* previous_size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = attrs_.find(fresh.ino);
  const bool changed =
      it == attrs_.end() || !SameMarker(it->second.attr, fresh);
  if (previous_size) previous_size->reset();
  if (token != epoch_) return true;  // raced with an own change: don't keep
  if (it != attrs_.end()) {
    if (previous_size) *previous_size = it->second.attr.size;
    it->second.attr = fresh;
    if (changed) it->second.stored_bytes.reset();
  } else {
    if (attrs_.size() >= max_entries_) attrs_.clear();
    attrs_.emplace(fresh.ino, Entry{fresh, std::nullopt});
  }
  return changed;
}

AttrCache::Entry* AttrCache::AtMarkerLocked(const InodeAttr& a) {
  auto it = attrs_.find(a.ino);
  if (it == attrs_.end() || !SameMarker(it->second.attr, a)) return nullptr;
  return &it->second;
}

std::optional<uint64_t> AttrCache::StoredBytes(const InodeAttr& a) {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = AtMarkerLocked(a);
  return e ? e->stored_bytes : std::nullopt;
}

void AttrCache::PutStoredBytes(const InodeAttr& a, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Entry* e = AtMarkerLocked(a)) e->stored_bytes = bytes;
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

uint64_t DirAttrCache::BeginChange() const {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

void DirAttrCache::Put(uint64_t token, const InodeAttr& dir,
                       Clock::time_point at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token != epoch_) return;  // raced with a change made another way
  auto it = dirs_.find(dir.ino);
  if (it != dirs_.end()) {
    const Timespec& held = it->second.attr.ctime;
    if (held.sec > dir.ctime.sec ||
        (held.sec == dir.ctime.sec && held.nsec > dir.ctime.nsec))
      return;  // a later commit is held already
    it->second = Entry{dir, at, false};
    return;
  }
  if (dirs_.size() >= max_entries_) dirs_.clear();
  dirs_.emplace(dir.ino, Entry{dir, at, false});
}

std::optional<InodeAttr> DirAttrCache::Take(uint64_t ino,
                                            std::chrono::nanoseconds max_age,
                                            std::chrono::nanoseconds* age) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = dirs_.find(ino);
  if (it == dirs_.end() || it->second.taken) return std::nullopt;
  it->second.taken = true;  // kept as the newest commit seen (Put)
  const auto a = Clock::now() - it->second.at;
  if (a >= max_age) return std::nullopt;
  *age = std::chrono::duration_cast<std::chrono::nanoseconds>(a);
  return it->second.attr;
}

void DirAttrCache::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  dirs_.erase(ino);
}

size_t DirAttrCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dirs_.size();
}

}  // namespace stripefs::fs
