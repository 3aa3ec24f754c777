// StripeWriter: per-file stripe coalescing between FUSE WRITEs and the
// erasure-coded backend (StripeClient).
//
// WRITE data is copied into stripe-sized buffers (one per stripe of the file
// that has unwritten data). A buffer that becomes complete (every byte of
// the stripe written) is sent to the backend at once as exactly one whole
// stripe, which the client encodes without reading anything (full-stripe
// encode). A WRITE that covers a whole stripe with nothing buffered there is
// sent straight from the request, without a copy. Partial stripes stay
// buffered until Flush() (FSYNC, FLUSH, RELEASE, truncate, destroy), an idle
// timeout or the shared memory cap (both driven by StripeFs's background
// thread through FlushIdle()/FlushOldest()); the client then writes them by
// read-modify-write or parity-delta.
//
// Durability: buffered data is volatile until Flush() returns OK, exactly
// like the page cache. A failed backend write of buffered data that the
// caller did not just hand in (idle timeout, memory cap, or a WRITE that
// completed a stripe holding earlier WRITEs' bytes) is remembered and
// returned by the next Flush() (then cleared), like the page cache's
// writeback error reporting; it is recorded before the buffer retires, so a
// Flush() waiting for that stripe always sees it. The data of a failed
// flush is dropped, never retried forever.
//
// Flush() covers what was buffered or in flight when it was called; data
// written while it runs may go out with it but is not waited for, so a
// continuous writer cannot starve an fsync.
//
// Reads see buffered data: Read() overlays buffered and in-flight bytes on
// what the backend returns, and the file size it uses is
// max(committed size, end of buffered data).
//
// With coalescing off every Write() goes straight to the backend.
//
// Ordering: at most one backend write per stripe is in flight; a later
// flush of the same stripe waits for it, so the newest data always commits
// last.
//
// Thread-safety: all methods are thread-safe (one mutex per writer; backend
// writes run without it). Owned by StripeFs (shared_ptr, one per inode);
// borrows the StripeClient, MetaService, budget and counters, which must
// outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backend/client/stripe_client.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"

namespace stripefs::fs {

// Why buffered data went to the backend (index into CoalesceCounters).
enum class FlushReason : int {
  kFull = 0,   // the stripe became complete
  kFsync,      // FSYNC
  kFlush,      // FLUSH (close)
  kRelease,    // RELEASE (last close)
  kIdle,       // idle timeout (background)
  kMemoryCap,  // memory cap reached
  kTruncate,   // SETATTR size / fallocate / punch hole
  kDestroy,    // unmount
  kOther,      // lseek and other internal needs
  kCount
};
const char* FlushReasonName(FlushReason r);

// Memory used by all buffers of a mount, against a cap. Thread-safe.
class CoalesceBudget {
 public:
  explicit CoalesceBudget(uint64_t cap_bytes) : cap_(cap_bytes) {}
  void Add(int64_t delta) { used_.fetch_add(delta); }
  uint64_t used() const {
    int64_t u = used_.load();
    return u < 0 ? 0 : static_cast<uint64_t>(u);
  }
  uint64_t cap() const { return cap_; }
  bool over() const { return used() > cap_; }

 private:
  const uint64_t cap_;
  std::atomic<int64_t> used_{0};
};

// What coalescing did (relaxed atomics, shared by all writers of a mount).
struct CoalesceCounters {
  std::atomic<uint64_t> full_from_buffer{0};  // complete buffers sent
  std::atomic<uint64_t> full_direct{0};  // whole-stripe WRITEs sent uncopied
  std::atomic<uint64_t>
      partial_flushes[static_cast<int>(FlushReason::kCount)]{};
  std::atomic<uint64_t> partial_bytes{0};    // bytes sent by partial flushes
  std::atomic<uint64_t> write_through{0};    // coalescing off: WRITEs passed on
  std::atomic<uint64_t> deferred_errors{0};  // failed flushes nobody awaited
  std::atomic<uint64_t> reported_errors{0};  // ... later returned by Flush()
};

struct StripeWriterOptions {
  bool coalesce = true;
  // Time source for last-write stamps (idle timeout, oldest-first memory
  // cap flushes). Null: std::chrono::steady_clock::now. Tests inject a fake.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

class StripeWriter {
 public:
  StripeWriter(uint64_t ino, StripeClient* client, MetaService* meta,
               CoalesceBudget* budget, CoalesceCounters* counters,
               StripeWriterOptions options);
  ~StripeWriter();  // drops anything still buffered (call Flush first)
  StripeWriter(const StripeWriter&) = delete;
  StripeWriter& operator=(const StripeWriter&) = delete;

  // Buffers (or writes through) `data` at `offset`. An error here is from a
  // backend write this call had to do (a completed stripe, write-through).
  Status Write(uint64_t offset, std::span<const uint8_t> data);

  // Reads up to out.size() bytes at `offset`: committed data from the
  // backend with buffered bytes on top. Returns the byte count (short at
  // EOF = max(committed size, buffered end)).
  Result<size_t> Read(uint64_t offset, std::span<uint8_t> out);

  // Sends every buffered stripe to the backend and waits for all in-flight
  // writes. Returns the first error of this flush, else a remembered error
  // of an earlier background flush (which is then cleared).
  Status Flush(FlushReason why);

  // Truncates the file to `new_size`: drops buffered bytes at or past it
  // (they would be cut anyway), flushes the rest, then resizes through the
  // client. Returns the new attributes.
  Result<InodeAttr> Truncate(uint64_t new_size);

  // Background: sends the buffered stripes last written before `cutoff`.
  // The stripe at the file's write frontier (the highest buffered stripe,
  // filled by one contiguous run that ends at the highest buffered byte: a
  // sequential writer's next stripe in the making) waits until
  // `frontier_cutoff` instead: a writer whose page-cache writeback paused
  // usually completes it, and a completed stripe needs no RMW. Errors are
  // remembered for the next Flush().
  void FlushIdle(std::chrono::steady_clock::time_point cutoff,
                 std::chrono::steady_clock::time_point frontier_cutoff);
  void FlushIdle(std::chrono::steady_clock::time_point cutoff) {
    FlushIdle(cutoff, cutoff);
  }
  // Sends the least recently written buffered stripe; false if none.
  bool FlushOldest(FlushReason why);
  // Oldest last-write time of a buffered stripe (max() if none).
  std::chrono::steady_clock::time_point OldestWrite() const;

  // End of buffered or in-flight data (0 if none).
  uint64_t BufferedEnd() const;
  bool HasBuffered() const;
  // Stripe numbers that hold buffered or in-flight data, sorted.
  std::vector<uint64_t> BufferedStripes() const;
  // Drops all buffered data (the inode is being deleted).
  void Discard();

  uint64_t ino() const { return ino_; }

 private:
  struct Buffer {
    uint64_t stripe = 0;
    std::vector<uint8_t> owned;          // S bytes when copied
    std::span<const uint8_t> bytes;      // owned or the request's data (direct)
    std::map<uint32_t, uint32_t> valid;  // start -> end, merged
    std::chrono::steady_clock::time_point last_write;
    bool Complete(uint64_t stripe_size) const;
    void AddRange(uint32_t start, uint32_t end);
  };
  using BufferPtr = std::shared_ptr<Buffer>;

  // Sends `buf` (already moved to inflight_) and retires it. Called without
  // mu_. Returns the backend status; with `defer`, a failure is also
  // remembered for the next Flush() (before the buffer retires).
  Status SendBuffer(const BufferPtr& buf, FlushReason why, bool defer);
  // Moves buffers_[stripe] to inflight_ once no write of that stripe is in
  // flight; lock held on entry and exit (may wait). Null if gone meanwhile.
  BufferPtr TakeForSend(std::unique_lock<std::mutex>& lock, uint64_t stripe);
  // Removes `buf` from inflight_ and remembers `deferred` (if not OK) in
  // the same critical section.
  void Retire(const BufferPtr& buf, const Status& deferred);
  std::chrono::steady_clock::time_point Now() const;
  void RecomputeEnd();  // lock held

  const uint64_t ino_;
  StripeClient* const client_;
  MetaService* const meta_;
  CoalesceBudget* const budget_;
  CoalesceCounters* const counters_;
  const StripeWriterOptions options_;
  const uint64_t stripe_size_;

  mutable std::mutex mu_;
  std::condition_variable cv_;              // an in-flight write retired
  std::map<uint64_t, BufferPtr> buffers_;   // stripe -> newest data
  std::map<uint64_t, BufferPtr> inflight_;  // stripe -> being written
  uint64_t buffered_end_ = 0;
  Status deferred_;  // first error of a background flush not yet reported
};

}  // namespace stripefs::fs
