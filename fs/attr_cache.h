// AttrCache: the mount's copy of regular files' attributes, so that a READ
// of a file this mount is not writing needs no GetAttr (its size bounds
// the read), and the change marker that decides whether the file's cached
// stripe map is still valid.
//
// Change marker: (size, mtime, ctime). Without the writeback cache every
// metadata commit of a stripe sets mtime = ctime = now (CLOCK_REALTIME,
// nanoseconds), as do truncate and every attribute change; with it the
// writer's kernel stores its write() times after the commits (StripeFs
// SETATTR), so another client's closed write moves it. Update()
// reports a moved (or unknown) marker; the caller then forgets the file's
// stripe map (StripeClient::ForgetStripeMap). Known limit: two commits
// with an equal timestamp and size (a clock stepped back, or under the
// writeback cache a rewrite within one kernel clock tick of the previous
// time flush) look unchanged.
//
// Own changes: the file system calls Forget() after its own size or data
// changes; an Update() whose fetch began before that Forget() is dropped
// (token check), so an attribute read before a commit never outlives it.
//
// Stored bytes (st_blocks): the committed data bytes of the file's stripe
// map up to EOF, which take a scan of the whole map to count, are kept
// with the entry for the marker they were counted at (PutStoredBytes) and
// dropped when an Update() sees the marker move, since every change of the
// map moves it. So a GETATTR of an unchanged file costs one point read.
//
// Memory: at most `max_entries` inodes; past that the cache starts empty
// (every file then revalidates once). Thread-safety: thread-safe (one
// mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "backend/meta/meta_types.h"

namespace stripefs::fs {

class AttrCache {
 public:
  explicit AttrCache(size_t max_entries = size_t{1} << 18)
      : max_entries_(max_entries) {}

  std::optional<InodeAttr> Get(uint64_t ino) const;
  // Take BEFORE fetching the attributes to pass to Update().
  uint64_t BeginFetch() const;
  // Stores `fresh` (unless a Forget() came after `token`); true if the
  // change marker differs from the cached one or none was cached. With
  // `previous_size`, it receives the size `fresh` replaced (nullopt when
  // nothing was cached or the fetch raced with a Forget()).
  bool Update(uint64_t token, const InodeAttr& fresh,
              std::optional<uint64_t>* previous_size = nullptr);
  void Forget(uint64_t ino);
  // The stored bytes kept for `a`'s file at `a`'s marker, if any.
  std::optional<uint64_t> StoredBytes(const InodeAttr& a);
  // Keeps `bytes`, counted from a map read after `a` was fetched, if the
  // cached entry still has `a`'s marker (else drops it: stale or unknown).
  void PutStoredBytes(const InodeAttr& a, uint64_t bytes);
  size_t size() const;

 private:
  const size_t max_entries_;
  mutable std::mutex mu_;
  struct Entry {
    InodeAttr attr;
    std::optional<uint64_t> stored_bytes;  // at attr's marker
  };
  // Under mu_: `a`'s entry if it has `a`'s change marker, else null.
  Entry* AtMarkerLocked(const InodeAttr& a);
  uint64_t epoch_ = 0;  // bumped by Forget; guarded by mu_
  std::unordered_map<uint64_t, Entry> attrs_;
};

// DirAttrCache: a directory's attributes as committed by this mount's own
// create, unlink, link or rename in it (MetaService::CreateEntry,
// UnlinkEntry, LinkEntry, RenameEntry return them), kept to answer the
// GETATTR the kernel sends next -- it invalidates the directory's
// attributes after every entry change and asks again at its
// next permission check -- without a metadata call.
//
// Contract: an entry is served once (Take) and only while younger than the
// attribute timeout; the kernel is then given the rest of that timeout, so
// it holds the attributes no longer after their commit than if it had asked
// metadata at that moment (docs/filesystem.md, "Client caches"). Another
// client's change inside that window is not seen, as with the kernel's own
// attribute cache. Every other change of a directory through this mount
// (rmdir, mkdir/mknod/symlink/link/rename by the fallback path, setattr,
// xattrs) calls Forget first; a Put whose change began before a Forget
// (token) is dropped, and of two Puts the later commit (ctime) wins, so a
// reply never goes back in time.
//
// Memory: at most `max_entries` directories (then it starts empty).
// Thread-safety: thread-safe (one mutex).
class DirAttrCache {
 public:
  using Clock = std::chrono::steady_clock;
  explicit DirAttrCache(size_t max_entries = 4096)
      : max_entries_(max_entries) {}

  // Take BEFORE the change whose result is passed to Put().
  uint64_t BeginChange() const;
  void Put(uint64_t token, const InodeAttr& dir, Clock::time_point at);
  // The attributes if not served yet and younger than `max_age` (served
  // either way), and their age.
  std::optional<InodeAttr> Take(uint64_t ino, std::chrono::nanoseconds max_age,
                                std::chrono::nanoseconds* age);
  void Forget(uint64_t ino);
  size_t size() const;

 private:
  struct Entry {
    InodeAttr attr;
    Clock::time_point at;
    bool taken = false;  // served: kept only to order later Puts
  };
  const size_t max_entries_;
  mutable std::mutex mu_;
  uint64_t epoch_ = 0;  // bumped by Forget; guarded by mu_
  std::unordered_map<uint64_t, Entry> dirs_;
};

}  // namespace stripefs::fs
