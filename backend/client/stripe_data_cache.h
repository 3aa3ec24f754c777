// StripeDataCache: whole stripes' data, read once and kept for the readers
// that follow: stripes read ahead of sequential readers, and degraded
// stripes (a data chunk's server down or the chunk known missing), which
// are reconstructed once instead of once per READ.
//
// Keyed by (inode, stripe, version): a committed version's bytes never
// change (a write makes a new version), so an entry is valid as long as the
// stripe map that named its version is; no invalidation is needed.
//
// An entry is reserved (Reserve) before its stripe is read and completed
// (Complete) when the read ends; readers that find it meanwhile wait for
// that one read (Find + Wait) instead of starting their own.
//
// Memory: reserved plus completed entries hold at most `budget_bytes`
// (the per-mount budget, StripeClientOptions::read_cache_bytes); Reserve
// evicts completed entries, least recently used first, and fails when the
// budget is held by reads in flight. Thread-safety: thread-safe (one mutex;
// waiting happens outside it).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

namespace stripefs {

// The stored data columns of one stripe version: data cell i's columns
// [0, chunk_len) at bytes [i * chunk_len, (i + 1) * chunk_len). The buffer
// is allocated without zeroing (every byte is read into it before it is
// published): a 1 MiB stripe costs no 1 MiB memset.
struct CachedStripe {
  uint32_t chunk_len = 0;
  size_t size = 0;  // bytes in `bytes`
  std::unique_ptr<uint8_t[]> bytes;
  void Allocate(size_t n) {
    bytes = std::make_unique_for_overwrite<uint8_t[]>(n);
    size = n;
  }
};
using CachedStripePtr = std::shared_ptr<const CachedStripe>;

// Where the bytes of one READ are: in the caller's buffer, except up to
// kMax pieces borrowed from cached stripes, which are held (not copied)
// until the gather is destroyed. So a READ served from read-ahead data is
// written to the FUSE reply straight from the cache (writev gathers it). A
// reader with no room left copies into the caller's buffer as before. No
// heap allocation.
class ReadGather {
 public:
  static constexpr size_t kMax = 8;
  bool CanBorrow() const { return borrowed_ < kMax; }
  // Caller-buffer bytes [pos, pos + n) are at `src`, inside `c` (held).
  // Pieces are borrowed in increasing `pos`. Needs CanBorrow().
  void Borrow(CachedStripePtr c, size_t pos, const uint8_t* src, size_t n) {
    pieces_[borrowed_++] = {pos, n, src, std::move(c)};
  }
  bool empty() const { return borrowed_ == 0; }
  // The iovecs of bytes [0, total) of the READ whose buffer is `buf`.
  std::span<const iovec> Parts(const uint8_t* buf, size_t total) {
    size_t n = 0, at = 0;
    auto add = [&](const uint8_t* p, size_t len) {
      if (len > 0) iov_[n++] = {const_cast<uint8_t*>(p), len};
    };
    for (size_t i = 0; i < borrowed_; ++i) {
      const Piece& b = pieces_[i];
      if (b.pos >= total) break;
      add(buf + at, b.pos - at);
      add(b.src, std::min(b.len, total - b.pos));
      at = b.pos + b.len;
    }
    if (at < total) add(buf + at, total - at);
    return {iov_.data(), n};
  }

 private:
  struct Piece {
    size_t pos = 0, len = 0;
    const uint8_t* src = nullptr;
    CachedStripePtr hold;
  };
  std::array<Piece, kMax> pieces_;
  size_t borrowed_ = 0;
  std::array<iovec, 2 * kMax + 1> iov_{};
};

class StripeDataCache {
 public:
  struct Key {
    uint64_t ino = 0, stripe = 0, version = 0;
    friend auto operator<=>(const Key&, const Key&) = default;
  };
  // A load shared by every reader of the entry; null once done = failed.
  using Load = std::shared_future<CachedStripePtr>;

  explicit StripeDataCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  uint64_t budget() const { return budget_; }
  // The entry of `key` (loading or loaded), if any; refreshes its LRU rank.
  std::optional<Load> Find(const Key& key);
  // Creates a loading entry of `bytes` for `key` and returns the promise
  // to complete; null if the entry exists or the budget is held by loads.
  std::shared_ptr<std::promise<CachedStripePtr>> Reserve(const Key& key,
                                                         uint64_t bytes);
  // Completes the load of `key` with `data` (null: the read failed, the
  // entry is dropped so the next reader tries again).
  void Complete(const Key& key,
                const std::shared_ptr<std::promise<CachedStripePtr>>& p,
                CachedStripePtr data);

  uint64_t used() const;  // bytes reserved or held

 private:
  struct Entry {
    Load load;
    uint64_t bytes = 0;
    bool done = false;
    std::list<Key>::iterator lru;
  };
  bool EvictOne();  // mu_ held; false if nothing completed to evict

  const uint64_t budget_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // front: most recently used
};

}  // namespace stripefs
