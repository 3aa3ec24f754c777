// StripeWriter: per-file stripe coalescing between FUSE WRITEs and the
// erasure-coded backend (StripeClient).
//
// WRITE data is copied into stripe-sized buffers (one per stripe of the file
// that has unwritten data). Buffers come from a BufferPool shared by the
// mount (options.pool; reused, never zero-filled): bytes outside a
// buffer's valid ranges are stale and nothing reads them (reads overlay
// only valid ranges, and the client writes only those ranges; the gaps of
// a new partial stripe are zeros made by its plan, kNewPartial). A buffer that
// becomes complete (every byte of the stripe written) is sent to the backend as
// exactly one whole stripe, which the client encodes without reading anything
// (full-stripe encode). Partial stripes stay buffered until Flush() (FSYNC,
// FLUSH, RELEASE, truncate, destroy), an idle timeout or the shared memory cap
// (both driven by StripeFs's background thread through
// FlushIdle()/FlushOldest()); the client then writes them by read-modify-write
// or parity-delta.
//
// Pipelining (options.sender set): sends run on the mount's StripeSender,
// so a WRITE that completes a stripe is acknowledged once its bytes are
// buffered. A WRITE that covers a whole stripe with nothing buffered there
// is not copied if the caller can hand over the memory holding it
// (`keep`, e.g. the FUSE request buffer: Replier::KeepRequestBuffer): the
// stripe is sent from that memory, encoded in place, and the lease is
// released when the send retires; a refused keep (empty lease) copies. At most
// options.file_window sends of this file and StripeSender::window() sends of
// the mount are in flight; a WRITE (or flush) that finds its window full waits,
// so memory stays bounded by the memory cap plus one stripe per mount window
// slot. Flush() sends every dirty stripe at once as one batch from its own
// thread (outside the windows: the buffers exist already): the client makes
// their versions in parallel and commits them all with one metadata call
// (StripeClient::WriteStripes), so one fsync of N dirty stripes costs one
// commit and lets the chunk servers' group commits cover all N; then it
// waits for every earlier send. Without a sender, sends run in the calling
// thread and a WRITE that covers a whole stripe with nothing buffered there
// is sent straight from the request, without a copy.
//
// Durability: buffered data is volatile until Flush() returns OK, exactly
// like the page cache. A failed backend write the caller did not wait for
// (every pipelined send, idle timeout, memory cap, or a synchronous WRITE
// that completed a stripe holding earlier WRITEs' bytes) is remembered and
// returned by the next Flush() (then cleared), like the page cache's
// writeback error reporting; it is recorded before the buffer retires, so a
// Flush() waiting for that stripe always sees it. The data of a failed
// flush is dropped, never retried forever.
//
// Size follows data (XFS moves the on-disk EOF only at I/O completion): a
// stripe's commit never raises the committed file size past the start of
// a lower stripe of this file that is still buffered or in flight, nor
// past a gap above the committed data (a WRITE for the gap may still be on
// its way: the kernel sends one stream's WRITEs on several threads). So a
// crash (of this process or of metad) never leaves a size that covers
// uncommitted stripes reading as zeros. Data committed above such a cap is
// sized by a later commit once the data below it is in, by FlushIdle()
// over contiguous data, and at the latest by Flush() (SetAttr with
// kSetSizeAtLeast, which never shrinks the file; a real hole left by a
// sparse writer is sized there). Until then Read(), BufferedEnd() (and
// GETATTR through it) include it.
//
// Flush() covers what was buffered or in flight when it was called; data
// written while it runs may go out with it but is not waited for, so a
// continuous writer cannot starve an fsync.
//
// Reads see buffered data: Read() overlays buffered and in-flight bytes on
// what the backend returns, and the file size it uses is
// max(committed size, end of buffered or not yet sized data). The committed
// size is read from metadata once and kept until it may have moved: every
// commit, size raise and truncate of this writer forgets it (under mu_,
// before the data leaves the in-flight set), and so does
// ForgetCommittedSize() (StripeFs: an attribute fetch saw the file changed
// elsewhere, close-to-open). So a READ makes no metadata call while the file
// is only being written into buffers, and at most one per commit.
//
// Times (the kernel's mtime and ctime under the writeback cache, sent by
// SETATTR at its inode writeback, close and fsync): HoldTimes() keeps them
// with the data buffered or in flight when they arrive, never forcing a
// commit (a time flush that cut a partial stripe would break coalescing).
// They are stored, with kKeepTimes, by the metadata update that follows
// the commit making that data durable: Flush() stores the times it found
// held with its size raise (one SetAttr) or alone after its commits; a
// pipelined or idle stripe commit that leaves nothing pending stores them
// right after its commit; FlushIdle() stores them once nothing is
// pending. So metadata never shows times newer than its data, and an
// older hold never lands after a newer one (stores are serialized and
// numbered). A failed store drops the times (like a failed flush's data)
// and is reported by the next Flush().
//
// With coalescing off every Write() goes straight to the backend (and the
// size rule does not apply: each write raises the size to its own end).
//
// Ordering: at most one backend write per stripe is in flight; a later
// flush of the same stripe waits for it, so the newest data always commits
// last. Different stripes may commit in any order (the size rule above
// keeps that safe).
//
// Thread-safety: all methods are thread-safe (one mutex per writer; backend
// writes run without it). Owned by StripeFs (shared_ptr, one per inode);
// borrows the StripeClient, MetaService, budget, counters and sender, which
// must outlive it. The destructor waits for the writer's sends in flight.
// Known limit: the size rule covers this writer's own stripes; two clients
// writing one file are ordered only by the commit CAS.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/client/stripe_client.h"
#include "backend/client/thread_pool.h"
#include "backend/meta/meta_service.h"
#include "common/buffer_pool.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "fs/stripe_sender.h"

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
  std::atomic<uint64_t> full_direct{0};   // whole-stripe WRITEs sent uncopied
  std::atomic<uint64_t> keep_refused{0};  // ... copied: `keep` gave nothing
  std::atomic<uint64_t>
      partial_flushes[static_cast<int>(FlushReason::kCount)]{};
  std::atomic<uint64_t> partial_bytes{0};    // bytes sent by partial flushes
  std::atomic<uint64_t> write_through{0};    // coalescing off: WRITEs passed on
  std::atomic<uint64_t> deferred_errors{0};  // failed flushes nobody awaited
  std::atomic<uint64_t> reported_errors{0};  // ... later returned by Flush()
  std::atomic<uint64_t> file_window_waits{0};  // sends that waited (file)
  std::atomic<uint64_t> capped_commits{0};  // size held below a pending stripe
  std::atomic<uint64_t> size_raises{0};     // EOF raised after such commits
  std::atomic<uint64_t> read_size_fetches{0};  // READs that asked for the size
};

struct StripeWriterOptions {
  bool coalesce = true;
  // Time source for last-write stamps (idle timeout, oldest-first memory
  // cap flushes). Null: std::chrono::steady_clock::now. Tests inject a fake.
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Pipelined sends (not owned). Null: sends run in the calling thread.
  StripeSender* sender = nullptr;
  // Pipelined sends of this file in flight at most (>= 1).
  size_t file_window = 8;
  // Stripe buffers (not owned; buffer_size() == the stripe size). Null: the
  // writer keeps a small pool of its own.
  BufferPool* pool = nullptr;
};

class StripeWriter {
 public:
  StripeWriter(uint64_t ino, StripeClient* client, MetaService* meta,
               CoalesceBudget* budget, CoalesceCounters* counters,
               StripeWriterOptions options);
  ~StripeWriter();  // drops anything still buffered (call Flush first)
  StripeWriter(const StripeWriter&) = delete;
  StripeWriter& operator=(const StripeWriter&) = delete;

  // Hands over the memory holding a Write()'s `data` (same addresses):
  // the returned lease keeps it valid until released. Called at most once
  // per Write(); an empty lease means "copy it".
  using KeepFn = std::function<BufferPool::Lease()>;

  // Buffers (or writes through) `data` at `offset`. An error here is from a
  // backend write this call had to do (a completed stripe without a
  // sender, write-through). May wait for a send window. `keep` (may be
  // empty): see Pipelining above.
  Status Write(uint64_t offset, std::span<const uint8_t> data,
               const KeepFn& keep = {});

  // Reads up to out.size() bytes at `offset`: committed data from the
  // backend with buffered bytes on top. Returns the byte count (short at
  // EOF = max(committed size, buffered end)).
  Result<size_t> Read(uint64_t offset, std::span<uint8_t> out);

  // Sends every buffered stripe to the backend and waits for all in-flight
  // writes, then raises the committed size to the end of the data. Returns
  // the first error of this flush, else a remembered error of an earlier
  // background or pipelined send (which is then cleared).
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
  // Sends the least recently written buffered stripe and waits for it;
  // false if none.
  bool FlushOldest(FlushReason why);
  // Oldest last-write time of a buffered stripe (max() if none).
  std::chrono::steady_clock::time_point OldestWrite() const;

  // End of buffered, in-flight or committed-but-not-yet-sized data (0 if
  // none): the file size is max(committed size, this).
  uint64_t BufferedEnd() const;
  bool HasBuffered() const;
  // Stripe numbers that hold buffered or in-flight data, sorted.
  std::vector<uint64_t> BufferedStripes() const;
  // Drops all buffered data (the inode is being deleted).
  void Discard();
  // The committed size may have changed elsewhere: the next Read() fetches
  // it from metadata again.
  void ForgetCommittedSize();

  // mtime and/or ctime to store (see Times above).
  struct Times {
    std::optional<Timespec> mtime;
    std::optional<Timespec> ctime;
  };
  // Holds `t` (merged over earlier held times) if anything is buffered, in
  // flight, committed but not sized, or a times store is running; false
  // when nothing is pending: the caller stores `t` itself, now.
  bool HoldTimes(const Times& t);
  // The held times not stored yet (both empty if none), for attribute
  // replies.
  Times HeldTimes() const;
  bool HoldsTimes() const;

  uint64_t ino() const { return ino_; }

 private:
  struct Buffer {
    uint64_t stripe = 0;
    BufferPool::Lease owned;  // S bytes when copied (pooled)
    // The caller's memory holding `bytes` (kept request buffer; shared by
    // the stripes of one WRITE). Null when copied or sent synchronously.
    std::shared_ptr<BufferPool::Lease> kept;
    std::span<const uint8_t> bytes;      // owned or the request's data (direct)
    std::map<uint32_t, uint32_t> valid;  // start -> end, merged
    std::chrono::steady_clock::time_point last_write;
    bool async = false;  // sent on the StripeSender (counts in sending_)
    bool Complete(uint64_t stripe_size) const;
    void AddRange(uint32_t start, uint32_t end);
  };
  using BufferPtr = std::shared_ptr<Buffer>;

  // Sends `buf` (already moved to inflight_) and retires it. Called without
  // mu_. Returns the backend status; with `defer`, a failure is also
  // remembered for the next Flush() (before the buffer retires).
  Status SendBuffer(const BufferPtr& buf, FlushReason why, bool defer)
      STRIPEFS_EXCLUDES(mu_);
  // Flush(): sends `bufs` (distinct stripes, sorted, already in inflight_)
  // as one WriteStripes batch and retires them. Called without mu_.
  Status SendBatch(const std::vector<BufferPtr>& bufs, FlushReason why)
      STRIPEFS_EXCLUDES(mu_);
  // Commit-size caps of a batch's members (see SizeCap). Lock held.
  std::vector<uint64_t> BatchCaps(const std::vector<BufferPtr>& bufs) const
      STRIPEFS_REQUIRES(mu_);
  // Seeds contig_end_ from the committed size, once (drops mu_ around the
  // GetAttr).
  void SeedContig() STRIPEFS_REQUIRES(mu_);
  // File offset where `buf`'s data ends (its stripe start if empty).
  uint64_t DataEnd(const Buffer& buf) const;
  // Sends `buf` now (no sender: returns its status) or hands it to the
  // sender once the file window has room (returns OK; errors deferred).
  Status Dispatch(const BufferPtr& buf, FlushReason why, bool defer)
      STRIPEFS_EXCLUDES(mu_);
  // Commit-size cap for `stripe`: the start of the lowest other pending
  // stripe below it, else UINT64_MAX. Lock held.
  uint64_t SizeCap(uint64_t stripe) const STRIPEFS_REQUIRES(mu_);
  // Where EOF may be raised to now: min(unsized_end_, start of the lowest
  // pending stripe); 0 if nothing to raise. Lock held.
  uint64_t RaiseTarget() const STRIPEFS_REQUIRES(mu_);
  // Raises the committed size to at least `target` (0: no raise), then
  // forgets unsized_end_ up to it; with `times`, the same SetAttr stores
  // them. Called without mu_.
  Status RaiseSize(uint64_t target, const Times* times = nullptr)
      STRIPEFS_EXCLUDES(mu_);
  // Held times numbered by hold (gen 0: none).
  struct TimesHold {
    Times times;
    uint64_t gen = 0;
  };
  // The held times not stored yet (gen 0 if none). Lock held.
  TimesHold Held() const STRIPEFS_REQUIRES(mu_);
  // Nothing buffered, in flight or unsized. Lock held.
  bool Idle() const STRIPEFS_REQUIRES(mu_);
  // Stores `hold` (skipped if a later hold was stored) together with a
  // size raise to `raise` (0: none), then, while the writer is idle, any
  // times held meanwhile. Called without mu_; serialized by store_mu_.
  Status StoreTimes(const TimesHold& hold, uint64_t raise)
      STRIPEFS_EXCLUDES(mu_, store_mu_);
  // Waits until none of `bufs` is in flight any more. Lock held.
  void WaitRetired(UniqueMutexLock& lock, const std::vector<BufferPtr>& bufs)
      STRIPEFS_REQUIRES(mu_);
  // Waits until no write of `stripe` is in flight. Lock held on entry and
  // exit (released while waiting).
  void WaitNotInFlight(UniqueMutexLock& lock, uint64_t stripe)
      STRIPEFS_REQUIRES(mu_);
  // Moves buffers_[stripe] to inflight_ once no write of that stripe is in
  // flight; lock held on entry and exit (may wait). Null if gone meanwhile.
  BufferPtr TakeForSend(UniqueMutexLock& lock, uint64_t stripe)
      STRIPEFS_REQUIRES(mu_);
  // Removes `buf` from inflight_ and remembers `deferred` (if not OK) and
  // `committed_end` (data committed past its size, 0 if none) in the same
  // critical section; `committed`: its data is now in the backend.
  void Retire(const BufferPtr& buf, const Status& deferred, bool committed,
              uint64_t unsized_end) STRIPEFS_EXCLUDES(mu_);
  // Records [start, end) as committed for the contiguity rule. Lock held.
  void NoteCommitted(uint64_t start, uint64_t end) STRIPEFS_REQUIRES(mu_);
  std::chrono::steady_clock::time_point Now() const;
  void RecomputeEnd() STRIPEFS_REQUIRES(mu_);

  const uint64_t ino_;
  StripeClient* const client_;
  MetaService* const meta_;
  CoalesceBudget* const budget_;
  CoalesceCounters* const counters_;
  const StripeWriterOptions options_;
  const uint64_t stripe_size_;
  std::unique_ptr<BufferPool> own_pool_;  // when options.pool is null
  BufferPool* const pool_;

  // Guards the two maps, the Buffers in buffers_ and the size and times
  // bookkeeping below. A Buffer in inflight_ is read by its sender without
  // mu_ and changed by nobody else until it retires (Retire, under mu_).
  mutable Mutex mu_;
  std::condition_variable cv_;  // an in-flight write retired
  // stripe -> newest data
  std::map<uint64_t, BufferPtr> buffers_ STRIPEFS_GUARDED_BY(mu_);
  // stripe -> being written
  std::map<uint64_t, BufferPtr> inflight_ STRIPEFS_GUARDED_BY(mu_);
  uint64_t buffered_end_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // End of committed data whose commit was capped below it (see the size
  // rule); 0 once the committed size covers it.
  uint64_t unsized_end_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // Highest size RaiseSize() committed.
  uint64_t raised_to_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // Committed data is contiguous from 0 to contig_end_ (holes included
  // once the size covered them); committed_above_ holds what this writer
  // committed past a gap (start -> end). A commit past the gap keeps the
  // size at contig_end_: the gap may be data still on its way.
  // contig_known_: contig_end_ seeded from GetAttr.
  bool contig_known_ STRIPEFS_GUARDED_BY(mu_) = false;
  uint64_t contig_end_ STRIPEFS_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> committed_above_ STRIPEFS_GUARDED_BY(mu_);
  // Buffers handed to the sender, not yet retired.
  size_t sending_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // Read()'s copy of the committed size: valid while size_epoch_ equals
  // cached_size_epoch_. size_epoch_ moves with every change of the
  // committed size this writer makes or is told of.
  uint64_t size_epoch_ STRIPEFS_GUARDED_BY(mu_) = 1;
  uint64_t cached_size_epoch_ STRIPEFS_GUARDED_BY(mu_) = 0;
  uint64_t cached_size_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // First error of a background send not yet reported.
  Status deferred_ STRIPEFS_GUARDED_BY(mu_);
  Times held_ STRIPEFS_GUARDED_BY(mu_);  // merged holds not stored yet
  // Number of the newest hold, and of the newest hold stored (or dropped).
  uint64_t hold_gen_ STRIPEFS_GUARDED_BY(mu_) = 0;
  uint64_t stored_gen_ STRIPEFS_GUARDED_BY(mu_) = 0;
  // A StoreTimes() is running.
  bool storing_times_ STRIPEFS_GUARDED_BY(mu_) = false;
  // Serializes StoreTimes(); taken before mu_.
  Mutex store_mu_ STRIPEFS_ACQUIRED_BEFORE(mu_);
};

}  // namespace stripefs::fs
