#include "fs/atime_tracker.h"

#include <sys/stat.h>

#include <iterator>
#include <string>
#include <tuple>

#include "common/option_list.h"

namespace stripefs::fs {
namespace {

bool Before(const Timespec& a, const Timespec& b) {
  return std::tie(a.sec, a.nsec) < std::tie(b.sec, b.nsec);
}

}  // namespace

AtimeOptions AtimeOptionsFrom(const std::vector<std::string>& mount_options,
                              AtimeOptions base) {
  AtimeOptions o = base;
  for (const std::string& v : SplitOptionLists(mount_options)) {
    if (v == "noatime") o.mode = AtimeMode::kNoatime;
    if (v == "atime" || v == "relatime") o.mode = AtimeMode::kRelatime;
    if (v == "strictatime") o.mode = AtimeMode::kStrictatime;
    if (v == "nodiratime") o.nodiratime = true;
    if (v == "diratime") o.nodiratime = false;
    if (v == "lazytime") o.lazytime = true;
    if (v == "nolazytime") o.lazytime = false;
    if (v == "ro") o.read_only = true;
    if (v == "rw") o.read_only = false;
  }
  return o;
}

bool AtimeNeedsUpdate(AtimeMode mode, const InodeAttr& a, Timespec now) {
  switch (mode) {
    case AtimeMode::kNoatime:
      return false;
    case AtimeMode::kStrictatime:
      return a.atime != now;
    case AtimeMode::kRelatime:
      break;
  }
  // fs/inode.c relatime_need_update: atime not after mtime or ctime, or
  // at least a day old.
  if (!Before(a.mtime, a.atime)) return true;
  if (!Before(a.ctime, a.atime)) return true;
  return now.sec - a.atime.sec >= 24 * 60 * 60;
}

bool AtimeTracker::Enabled(bool dir) const {
  if (o_.read_only || o_.mode == AtimeMode::kNoatime) return false;
  return !(dir && o_.nodiratime);
}

bool AtimeTracker::Access(const InodeAttr& a, Timespec now) {
  if (!Enabled((a.mode & S_IFMT) == S_IFDIR)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  InodeAttr seen = a;
  auto it = entries_.find(a.ino);
  if (it != entries_.end() && Before(seen.atime, it->second.atime))
    seen.atime = it->second.atime;
  if (!AtimeNeedsUpdate(o_.mode, seen, now)) return false;
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxEntries) {
      // Forget what was written; pending updates stay.
      for (auto e = entries_.begin(); e != entries_.end();) {
        e = e->second.pending ? std::next(e) : entries_.erase(e);
      }
    }
    it = entries_.emplace(a.ino, Entry{}).first;
  }
  if (!it->second.pending) ++pending_;
  it->second = Entry{now, true};
  return true;
}

void AtimeTracker::Apply(InodeAttr* a) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(a->ino);
  if (it != entries_.end() && Before(a->atime, it->second.atime))
    a->atime = it->second.atime;
}

std::optional<Timespec> AtimeTracker::Take(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(ino);
  if (it == entries_.end() || !it->second.pending) return std::nullopt;
  it->second.pending = false;
  --pending_;
  return it->second.atime;
}

std::vector<std::pair<uint64_t, Timespec>> AtimeTracker::TakeAll() {
  std::vector<std::pair<uint64_t, Timespec>> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(pending_);
  for (auto& [ino, e] : entries_) {
    if (!e.pending) continue;
    e.pending = false;
    out.emplace_back(ino, e.atime);
  }
  pending_ = 0;
  return out;
}

void AtimeTracker::Restore(uint64_t ino, Timespec atime) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[ino];
  if (e.pending && !Before(atime, e.atime)) return;
  if (!e.pending) ++pending_;
  if (Before(e.atime, atime)) e.atime = atime;
  e.pending = true;
}

void AtimeTracker::Forget(uint64_t ino) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(ino);
  if (it == entries_.end()) return;
  if (it->second.pending) --pending_;
  entries_.erase(it);
}

size_t AtimeTracker::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_;
}

}  // namespace stripefs::fs
