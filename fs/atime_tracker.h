// AtimeTracker: the access times a mount owes to its files' metadata.
//
// FUSE marks every inode S_NOATIME, so the kernel never updates atime
// itself: it only forgets its copy after each READ and READDIR it sends
// (fuse_invalidate_atime) and asks again at the next stat. The file system
// decides, here, by the mount's policy (the VFS's own rules):
//   relatime (default, also "atime"): when atime <= mtime, atime <= ctime,
//     or atime is 24 h old or more;
//   strictatime: every access;
//   noatime: never; nodiratime: never for directories; a read-only mount:
//     never.
// An update is pending in memory (Access), shown in every attribute reply
// (Apply), and written to metadata in batches by the owner (Take, TakeAll):
// periodically, at the last close, fsync, syncfs, FORGET and unmount, or,
// with lazytime, only at fsync, syncfs, FORGET and unmount. So reads cost
// no metadata write: relatime writes at most one per inode per write cycle
// (or 24 h), strictatime at most one per inode per batch.
//
// Known limit: another client's explicit set of an older atime (utimes)
// shows on this mount only once it forgot the inode (FORGET).
//
// Memory: one entry per inode with a pending or recently seen atime, at
// most kMaxEntries (past that an access is decided on the attributes
// alone). Thread-safety: thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/meta/meta_types.h"

namespace stripefs::fs {

enum class AtimeMode { kRelatime, kStrictatime, kNoatime };

struct AtimeOptions {
  AtimeMode mode = AtimeMode::kRelatime;
  bool nodiratime = false;
  bool lazytime = false;   // write pending atimes only at fsync/sync/evict
  bool read_only = false;  // a read-only mount: atime never moves
};

// `base` changed by a list of -o values (comma lists; unknown ones
// ignored; the last atime option wins, as with mount(8)).
AtimeOptions AtimeOptionsFrom(const std::vector<std::string>& mount_options,
                              AtimeOptions base = {});

// Whether an access at `now` updates atime of `a` under `mode` (relatime:
// the VFS's relatime_need_update). Pure.
bool AtimeNeedsUpdate(AtimeMode mode, const InodeAttr& a, Timespec now);

class AtimeTracker {
 public:
  static constexpr size_t kMaxEntries = size_t{1} << 16;

  explicit AtimeTracker(AtimeOptions o) : o_(o) {}
  const AtimeOptions& options() const { return o_; }
  // Whether accesses to a directory (`dir`) or a file may move atime.
  bool Enabled(bool dir) const;

  // An access of `a` (its attributes as last fetched) at `now`: records
  // atime = now as pending if the policy says so (the newer of `a`'s atime
  // and one already pending or written counts). True if it did.
  bool Access(const InodeAttr& a, Timespec now);
  // Raises a->atime to the newest atime this mount set for its inode,
  // pending or written (a write in progress is not yet in what metadata
  // returns). An explicit set (SETATTR) must Forget() the inode first.
  void Apply(InodeAttr* a) const;
  // Takes the pending atime of `ino` to write (it stays known as written).
  std::optional<Timespec> Take(uint64_t ino);
  // Takes every pending atime.
  std::vector<std::pair<uint64_t, Timespec>> TakeAll();
  // Puts back an atime whose write failed (unless a newer one is pending).
  void Restore(uint64_t ino, Timespec atime);
  // Drops what is known of `ino` (after a write of it is taken, at FORGET).
  void Forget(uint64_t ino);
  size_t pending() const;

 private:
  struct Entry {
    Timespec atime;        // newest atime known (pending or written)
    bool pending = false;  // not yet written to metadata
  };
  const AtimeOptions o_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;  // guarded by mu_
  size_t pending_ = 0;                           // guarded by mu_
};

}  // namespace stripefs::fs
