// The write path of a volume's erasure-coded stripes: the executor that
// carries out a pure write plan (stripe_write_plan.h). Its parts:
// stripe_write.cc prepares, commits and batches (WriteMany's waves),
// stripe_write_encode.cc makes the new chunk bytes (parity delta or
// encode), write_wave.h is where a wave's stripes meet.
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
#include <utility>
#include <vector>

#include "backend/client/chunk_fanout.h"
#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/degraded_queue.h"
#include "backend/client/stripe_geometry.h"
#include "backend/client/stripe_locks.h"
#include "backend/client/stripe_map_cache.h"
#include "backend/client/stripe_read.h"
#include "backend/client/stripe_write_plan.h"
#include "backend/client/thread_pool.h"
#include "backend/client/version_collector.h"
#include "backend/meta/meta_service.h"
#include "common/buffer_pool.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "ec/codec.h"

namespace stripefs {

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
  // WriteMany: prepares every stripe of `reqs`, wave after wave (a wave:
  // at least one stripe, then while parallel_stripes and wave_bytes fit).
  void PrepareWaves(const std::vector<StripeWriteRequest>& reqs,
                    std::vector<Prepared>* prepared, std::vector<Status>* made,
                    std::vector<char>* retry);
  // What a batch commit leaves for after the stripe locks are released.
  struct BatchLeftovers {
    std::vector<const StripeWriteRequest*> redo;  // written again one by one
    // Replaced versions, for the VersionCollector.
    std::vector<std::pair<ObsoleteStripe, ChunkLayout>> collect;
  };
  // WriteMany: commits every prepared stripe in one CommitStripes call, all
  // or nothing (a failed stripe abandons the rest; a lost CAS race sends
  // each to `left->redo`).
  Status CommitPrepared(const std::vector<StripeWriteRequest>& reqs,
                        const std::vector<Status>& made,
                        const std::vector<char>& retry,
                        const std::vector<Prepared>& prepared,
                        BatchLeftovers* left);
  // CommitPrepared against a metadata service without batch commits.
  Status CommitOneByOne(uint64_t ino, const std::vector<StripeCommit>& commits,
                        const std::vector<const Prepared*>& committing,
                        BatchLeftovers* left);
  // Parity delta (kDelta): reads the old windows, patches data and parity
  // windows, clones the untouched cells (stripe_write_encode.cc).
  Status MakeDelta(Prepared* p, Status* write_error);
  // The old windows of a delta: through the wave's batched read when every
  // chunk can be read directly and all of them arrive; else (and after any
  // failure) StripeReader::ReadWindows, which reads around what fails.
  // Known limit: a server that stops answering costs the first fsync after
  // it two read deadlines (the batch's, then ReadWindows' own, which marks
  // it suspect); later ones read around it at once.
  Status ReadDeltaWindows(Prepared* p,
                          std::span<const StripeReader::WindowRead> reads);
  // Full, new partial and RMW writes: encodes the k data cells (in place
  // when the request is the whole stripe, else merged by MergeDataCells).
  Status MakeEncoded(Prepared* p, Status* write_error);
  // k pooled cells holding the new version's data: the old data (RMW) or
  // zeros, with req's ranges merged in and a truncate's tail zeroed.
  Status MergeDataCells(Prepared* p, std::vector<BufferPool::Lease>* cells);
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
  Result<uint64_t> NextVersion() STRIPEFS_EXCLUDES(version_mu_);
  bool MovedOn(uint64_t ino, const StripeVersion& base);

  const Parts p_;
  const StripeGeometry geo_;
  const StripeWriteOptions options_;
  BufferPool cell_pool_;  // cell_size() buffers: parity, merged data cells
  GangRunner wave_threads_{options_.parallel_stripes};  // WriteMany's waves

  Mutex version_mu_;
  uint64_t next_version_ STRIPEFS_GUARDED_BY(version_mu_) = 0;
  uint64_t version_limit_ STRIPEFS_GUARDED_BY(version_mu_) = 0;
};

}  // namespace stripefs
