// The write path of a volume's erasure-coded stripes: a pure write plan and
// the executor that carries it out.
//
// Every write of a stripe makes exactly one new version, whatever the
// number of byte ranges it carries: k data + m parity chunks are written in
// parallel to the servers placement names, then the version is committed in
// metadata by compare-and-swap on the version the write started from. How
// the new chunks are made is the plan's `kind`:
//   kFull        the ranges cover the whole stripe: encode, read nothing;
//   kNewPartial  no committed version yet: the gaps are zeros;
//   kRmw         read the old data cells, merge the ranges, re-encode;
//   kDelta       parity delta: read each touched cell's own column
//                intervals and the parity's (the union of the touched
//                columns), patch them, clone the
//                untouched cells (chosen when those windows are fewer
//                bytes than the k cells an RMW reads: so several small
//                ranges in different cells take a delta too).
// Up to m failed chunk writes commit the stripe as degraded (missing mask;
// when a store refused a chunk for space, noted in the DegradedQueue for
// background repair), unless
// refuse_degraded_enospc and a failure was ENOSPC: then, like more than m
// failures, the write fails (EIO, or ENOSPC when that is why) and the
// previous version stays committed. No torn stripes: readers only see committed
// versions. The replaced version's chunks go to the VersionCollector
// (background).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "backend/client/chunk_fanout.h"
#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/degraded_queue.h"
#include "backend/client/stripe_geometry.h"
#include "backend/client/stripe_locks.h"
#include "backend/client/stripe_map_cache.h"
#include "backend/client/stripe_read.h"
#include "backend/client/thread_pool.h"
#include "backend/client/version_collector.h"
#include "backend/meta/meta_service.h"
#include "common/buffer_pool.h"
#include "common/status.h"
#include "ec/codec.h"

namespace stripefs {

inline constexpr uint64_t kNoTruncate = UINT64_MAX;

// One stripe's new bytes: the valid ranges of a buffer.
struct StripeWriteRequest {
  uint64_t ino = 0;
  uint64_t stripe = 0;
  // bytes[0] is stripe byte `origin`; every range lies inside the buffer.
  std::span<const uint8_t> bytes;
  uint32_t origin = 0;
  // Sorted, disjoint, non-empty, within the stripe. Empty only to truncate.
  std::vector<StripeRange> ranges;
  // Passed to the commit: the file grows to at least this size.
  uint64_t min_file_size = 0;
  // Truncate: bytes [zero_from, S) of the stripe become zeros and the chunk
  // length shrinks to fit (kNoTruncate: not a truncate).
  uint64_t zero_from = kNoTruncate;

  const uint8_t* At(uint64_t stripe_offset) const {
    return bytes.data() + (stripe_offset - origin);
  }
};

// EINVAL (naming the bad range) unless `req`'s ranges obey the rules above.
Status ValidateWriteRequest(const StripeGeometry& geo,
                            const StripeWriteRequest& req);

enum class WriteKind { kFull, kNewPartial, kRmw, kDelta };

// Columns [lo, hi) of a chunk (empty: lo == hi).
struct ColumnWindow {
  uint32_t lo = 0;
  uint32_t hi = 0;
};

// Parity windows of a delta: touched column intervals closer than this
// are merged into one window. Below a 4 KiB page the bytes saved do not pay
// for a separate range: the chunk store rounds every range out to its
// 4 KiB CRC blocks (reading and verifying the partly covered ones), and
// each window is another read and another patch range on the wire.
inline constexpr uint32_t kParityWindowGap = 4096;
// At most this many parity windows per delta (the closest ones are merged
// beyond it): bounds the reads and the pieces of a patched chunk.
inline constexpr size_t kMaxParityWindows = 16;

struct WritePlan {
  WriteKind kind = WriteKind::kFull;
  uint32_t chunk_len = 0;  // bytes in each chunk of the new version
  uint32_t touched = 0;    // mask of data cells receiving new bytes
  // kDelta: per data cell (k entries), the column windows it reads and
  // patches: its own touched columns merged like the parity windows
  // (sorted, disjoint; empty when untouched).
  std::vector<std::vector<ColumnWindow>> cell_windows;
  // kDelta: the parity windows read and patched, sorted, disjoint and
  // non-empty: the union of the touched columns of all cells (parity
  // column x changes exactly where some cell's column x does), intervals
  // less than kParityWindowGap apart merged, at most kMaxParityWindows.
  std::vector<ColumnWindow> parity_windows;
  uint64_t zero_from = kNoTruncate;
};

// The union of `windows` (any order, may overlap; empty ones ignored) as
// sorted, disjoint windows, where two less than `gap` columns apart become
// one, then neighbours with the smallest gaps merged until at most
// `max_windows` (at least 1) remain. Pure.
std::vector<ColumnWindow> MergeColumnWindows(std::vector<ColumnWindow> windows,
                                             uint32_t gap, size_t max_windows);

// Decides how to write `req` over `base` (null: no committed version).
// Pure: reads nothing, writes nothing.
WritePlan PlanStripeWrite(const StripeGeometry& geo, bool parity_delta,
                          const StripeVersion* base,
                          const StripeWriteRequest& req);

struct StripeWriteOptions {
  int commit_retries = 16;       // CAS conflicts before giving up (EAGAIN)
  bool parity_delta = true;      // allow kDelta plans
  uint32_t version_batch = 256;  // versions reserved per metadata call
  // WriteMany works in waves: up to parallel_stripes stripes whose new
  // bytes add up to at most wave_bytes (at least one stripe) are prepared
  // at once and their chunk writes sent together, one ApplyChunkOps
  // request per server (so an fsync of 64 stripes of small writes is one
  // read round and one write round).
  size_t parallel_stripes = 64;
  uint64_t wave_bytes = uint64_t{16} << 20;
  // ENOSPC instead of a degraded commit when chunk writes were refused for
  // space (StripeClientOptions::refuse_degraded_enospc).
  bool refuse_degraded_enospc = false;
};

// Carries out write plans. A full stripe is encoded in place: the data
// chunks are sent straight from the request's bytes, only the m parity
// chunks are new buffers; other plans build k data cells. Cell buffers come
// from a bounded pool (BufferPool: reused, not zeroed; at most ~16 MiB
// idle). Ownership: borrows its parts (owned by StripeClient); owns the
// threads of its write waves (GangRunner, kept between waves). Thread-safety:
// all methods may be called concurrently; writes to one stripe through one
// executor are serialised by StripeLocks, writers in different clients by the
// commit CAS (the loser retries).
class StripeWriteExecutor {
 public:
  struct Parts {
    MetaService* meta;
    const ec::Codec* codec;
    ClusterView* view;
    ChunkFanout* fanout;
    StripeReader* reader;
    StripeLocks* locks;
    VersionCollector* collector;
    ClientCounters* counters;
    // Where writes find their base versions, and name the versions they
    // commit (see stripe_map_cache.h: valid because every commit is a CAS).
    StripeMapCache* maps;
    // True: commits leave mtime and ctime (CommitStripesKeepTimes, falling
    // back to CommitStripes on a service without it). Null: stamp them.
    const std::atomic<bool>* keep_times = nullptr;
    // Told of every commit left degraded because a store refused a chunk
    // for space (null: nobody).
    DegradedQueue* degraded = nullptr;
  };
  StripeWriteExecutor(const Parts& parts, StripeGeometry geometry,
                      const StripeWriteOptions& options)
      : p_(parts),
        geo_(geometry),
        options_(options),
        cell_pool_(
            geometry.cell_size(),
            std::max<size_t>(geometry.width(),
                             (size_t{16} << 20) / geometry.cell_size())) {}

  // One stripe: one version, one commit. Durable when OK.
  Status Write(const StripeWriteRequest& req);
  // Several stripes of one file (distinct stripes): each gets one version,
  // made for all stripes at once (in waves, see StripeWriteOptions: the
  // stripes of a wave read in parallel, then their chunk writes go out as
  // one ApplyChunkOps request per server, which group-commits them
  // together; per-op results map back to each stripe, so up to m failed
  // chunk writes still commit a stripe degraded), and all are committed
  // by one CommitStripes call (one metadata commit). If one stripe fails,
  // none commits. Stripes whose batch commit loses a CAS race are redone
  // one by one.
  Status WriteMany(const std::vector<StripeWriteRequest>& reqs);

 private:
  // WriteMany: where the stripes of one wave meet, once to read (the old
  // windows of their deltas, one ReadChunkRanges call per server) and once
  // to send their chunk writes (one ApplyChunkOps call per server).
  struct Wave;
  // A stripe whose new version's chunks are written, not yet committed.
  struct Prepared {
    const StripeWriteRequest* req = nullptr;
    bool skip = false;  // nothing to write (truncate of a hole)
    bool exists = false;
    StripeVersion base;
    WritePlan plan;
    ChunkLayout layout;
    uint64_t version = 0;
    uint32_t failed = 0;   // chunk writes that failed (<= m)
    bool nospace = false;  // one of them for space (ENOSPC)
    // WriteMany: the wave this stripe's reads and chunk writes join
    // (member `member`); null: read and sent on their own.
    Wave* wave = nullptr;
    size_t member = 0;
  };
  // CommitStripes, or CommitStripesKeepTimes when parts.keep_times says so.
  Status Commit(uint64_t ino, const std::vector<StripeCommit>& commits,
                uint64_t min_file_size, std::vector<ObsoleteStripe>* obsolete);
  bool KeepTimes() const {
    return p_.keep_times && p_.keep_times->load(std::memory_order_relaxed);
  }
  // Writes the chunks of a new version of req's stripe (stripe lock held).
  // *retry: start over (base moved on or map changed); else !ok = give up.
  Status Prepare(const StripeWriteRequest& req, bool last_attempt,
                 Prepared* out, bool* retry, Wave* wave = nullptr,
                 size_t member = 0);
  // Sends p's chunk ops (one per chunk index; through p->wave when set)
  // and returns the mask of those that failed, the worst error in *error.
  uint32_t SendOps(Prepared* p, std::vector<ChunkWriteOp> ops, Status* error);
  // WriteMany: prepares reqs[begin, end) at once, their chunk writes sent
  // together once every one of them is ready to send.
  void PrepareWave(const std::vector<StripeWriteRequest>& reqs, size_t begin,
                   size_t end, std::vector<Prepared>* prepared,
                   std::vector<Status>* made, std::vector<char>* retry);
  Status MakeDelta(Prepared* p, Status* write_error);
  // The old windows of a delta: through the wave's batched read when every
  // chunk can be read directly and all of them arrive; else (and after any
  // failure) StripeReader::ReadWindows, which reads around what fails.
  // Known limit: a server that stops answering costs the first fsync after
  // it two read deadlines (the batch's, then ReadWindows' own, which marks
  // it suspect); later ones read around it at once.
  Status ReadDeltaWindows(Prepared* p,
                          std::span<const StripeReader::WindowRead> reads);
  Status MakeEncoded(Prepared* p, Status* write_error);
  // Removes the new version's chunks (commit lost or never made).
  void Abandon(const Prepared& p);
  // After a successful commit: names the new version in the map cache and
  // counts the commit by kind (and degraded).
  void Committed(const Prepared& p);
  // The committed version of req's stripe (nullopt: none yet). From the map
  // cache when known, else from metadata with the map of the stripes after
  // it (kStripeMapWindow), so a sequential writer asks once per
  // window. A truncate always asks metadata: leaving a hole as it is must
  // not rest on a cached map.
  Result<std::optional<StripeVersion>> CommittedBase(
      const StripeWriteRequest& req);
  // WriteMany: reads the map of stripes [first, last] of `ino` in one call
  // unless it is cached or wider than a map window (best effort: a failure
  // shows up in each stripe's CommittedBase).
  void WarmMap(uint64_t ino, uint64_t first, uint64_t last);
  // A stale base (ESTALE commit, or a base that moved on): forget the
  // cached map of `ino`, so the next attempt asks metadata.
  void Stale(uint64_t ino);
  Result<uint64_t> NextVersion();
  bool MovedOn(uint64_t ino, const StripeVersion& base);

  const Parts p_;
  const StripeGeometry geo_;
  const StripeWriteOptions options_;
  BufferPool cell_pool_;  // cell_size() buffers: parity, merged data cells
  GangRunner wave_threads_{options_.parallel_stripes};  // WriteMany's waves

  std::mutex version_mu_;
  uint64_t next_version_ = 0;  // guarded by version_mu_
  uint64_t version_limit_ = 0;
};

}  // namespace stripefs
