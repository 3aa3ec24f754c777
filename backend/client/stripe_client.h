// StripeClient: the erasure-coded data path of a volume, as callers see it.
//
// A thin facade over the parts that do the work, each with its own header:
//   ClusterView          cluster map, placement, suspect servers (refresh)
//   StripeReader         reads, with on-the-fly reconstruction
//   StripeWriteExecutor  write plans (full, new partial, RMW, parity delta),
//                        one version and one commit per stripe write
//   VersionCollector     background deletion of replaced versions
//   StripeGeometry       the cell and stripe arithmetic
// Repair and scrub of single stripes live in the repairer (repairer.h).
//
// Reads and writes take the stripe map from a cache (stripe_map_cache.h):
// this client's commits name their new versions there, its failed writes
// and truncates forget the file's map; other clients' commits are seen by
// reads once the caller distrusts the map (DistrustStripeMap, the file
// system does it when a file's change marker moved) or when a cached
// version can no longer be read, and by writes when their commit's CAS
// fails (ESTALE: the writer forgets the map and starts over).
//
// Writes: every stripe a call touches gets exactly one new version, made
// durable (chunks, then the metadata commit) before the call returns; the
// stripes of one Write() call are committed by one metadata call. Old
// versions' chunks are deleted in the background. Reads only use committed
// versions, so no torn stripes.
//
// Ownership: borrows the MetaService and ChunkServerSet (they must outlive
// the client); owns everything else. Thread-safety: all public methods may
// be called concurrently. Known limit: two clients racing on one stripe can
// make one retry fail spuriously (its base version was collected).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/client/chunk_fanout.h"
#include "backend/client/chunk_server_set.h"
#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/degraded_queue.h"
#include "backend/client/stripe_data_cache.h"
#include "backend/client/stripe_geometry.h"
#include "backend/client/stripe_locks.h"
#include "backend/client/stripe_map_cache.h"
#include "backend/client/stripe_read.h"
#include "backend/client/stripe_write.h"
#include "backend/client/thread_pool.h"
#include "backend/client/version_collector.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "ec/codec.h"

namespace stripefs {

struct StripeClientOptions {
  // Cluster volumes: encrypt every RPC (payload and chunk data), not just
  // authenticate it (backend/rpc/session.h, secure mode).
  bool secure_wire = false;
  size_t io_threads = 64;    // chunk calls in flight (a 16-stripe fsync: 96)
  int commit_retries = 16;   // CAS conflicts before giving up (EAGAIN)
  bool parity_delta = true;  // use parity-delta updates when they read less
  uint32_t version_batch = 256;  // versions reserved per metadata round trip
  // A chunk read not answered within this time is treated as slow: the read
  // is served by reconstruction from other chunks read in parallel (the
  // slow read still counts if it finishes first). 0: wait for every read.
  std::chrono::milliseconds read_deadline{2000};
  // Cluster mode (Volume::ConnectCluster): deadline of one chunk read RPC,
  // which bounds how long an abandoned slow read occupies an I/O thread.
  // 0: the RPC call timeout (10 s).
  std::chrono::milliseconds chunk_read_timeout{5000};
  // Background re-read of the cluster map (server up/down changes); a
  // chunk transport error or slow read triggers one early. 0: only at
  // Create(), on failures and by RefreshClusterMap().
  std::chrono::milliseconds map_refresh_interval{1000};
  // Read-ahead: a sequential reader gets up to this many whole stripes
  // read ahead of it (0: none), within read_cache_bytes, which also holds
  // degraded stripes reconstructed once for the readers that follow (0:
  // neither).
  uint32_t read_ahead_stripes = 8;
  uint64_t read_cache_bytes = uint64_t{64} << 20;
  // Obsolete stripe versions waiting for background deletion before
  // writers wait for the collector.
  size_t gc_queue_stripes = 4096;
  // How long the collector lets obsolete versions gather before it deletes
  // them (one request and one index commit per server for the lot).
  std::chrono::milliseconds gc_linger{100};
  // A stripe write that would commit degraded because chunk writes were
  // refused with ENOSPC (the stores' reserve, near full) fails with ENOSPC
  // instead, nothing committed for that stripe (the old version stays).
  // Off (the default): it commits degraded, counted, and is healed in the
  // background (degraded_queue.h) once the stores take writes again.
  bool refuse_degraded_enospc = false;
  // Background repair of this client's degraded commits.
  DegradedQueueOptions degraded_queue;
};

class StripeClient {
 public:
  static Result<std::unique_ptr<StripeClient>> Create(
      MetaService* meta, ChunkServerSet* servers,
      const StripeClientOptions& options = {});
  // Stops the degraded-commit repair, finishes queued garbage collection.
  ~StripeClient();

  const Geometry& geometry() const { return geometry_; }
  uint64_t stripe_size() const { return geometry_.stripe_size(); }

  // Writes `data` at byte `offset` of file `ino`; returns once every touched
  // stripe is committed (durable). Raises the file size to offset+size, but
  // never past `size_cap` (a caller with lower stripes still in flight keeps
  // EOF below them and raises it later, see StripeWriter).
  Status Write(uint64_t ino, uint64_t offset, std::span<const uint8_t> data,
               uint64_t size_cap = UINT64_MAX);

  // Writes the `valid` byte ranges of one stripe's buffer (stripe_bytes[x]
  // is stripe byte x) as ONE new version with one commit, however many
  // ranges there are; bytes outside the ranges keep their committed
  // contents. Ranges: sorted, disjoint, non-empty, inside the buffer (else
  // EINVAL). The file grows to at least `min_file_size`.
  Status WriteStripe(uint64_t ino, uint64_t stripe,
                     std::span<const uint8_t> stripe_bytes,
                     const std::vector<StripeRange>& valid,
                     uint64_t min_file_size);

  // Several stripes of one file (e.g. every dirty stripe at fsync), each as
  // in WriteStripe (req.origin: the stripe byte at req.bytes[0]), committed
  // together: one CommitStripes call per 64 stripes. Distinct stripes only.
  Status WriteStripes(const std::vector<StripeWriteRequest>& reqs);

  // Reads min(out.size(), file_size - offset) bytes at `offset` (0 at or past
  // EOF); holes read as zeros. Returns the byte count.
  Result<size_t> Read(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                      uint64_t file_size);

  // Read without blocking (StripeReader::TryRead): served from the caches
  // and in-process chunk stores' memory, or WouldBlock with nothing
  // visible changed (then call Read).
  Result<size_t> TryRead(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                         uint64_t file_size);

  // Sets the size of `ino` (currently `old_size`) to `new_size`. Shrinking
  // first rewrites the new last stripe with the bytes past new_size zeroed,
  // so growing later reads zeros there; dropped stripes are deleted.
  Result<InodeAttr> Truncate(uint64_t ino, uint64_t old_size,
                             uint64_t new_size);

  // Queues the chunks of obsolete (dropped) stripe versions for background
  // deletion on every server that may hold them (best effort; failures are
  // counted, scrub finds leftovers).
  void DeleteStripes(const std::vector<ObsoleteStripe>& obsolete);
  // Waits until every deletion queued so far has been attempted.
  void DrainGarbage() { collector_->Drain(); }

  // Drops the cached stripe map of `ino` (another client may have changed
  // it): the next read asks metadata.
  void ForgetStripeMap(uint64_t ino) { maps_.Forget(ino); }
  // Another client may have changed `ino` (its change marker moved): reads
  // read its map again; writes keep their cached bases, which their
  // commits' CAS checks (StripeMapCache::Distrust).
  void DistrustStripeMap(uint64_t ino) { maps_.Distrust(ino); }

  // Whether commits, truncates and punched holes leave the files' mtime
  // and ctime alone (MetaService::CommitStripesKeepTimes, kKeepTimes): set
  // under the writeback cache, whose kernel owns them and stores them with
  // SETATTR. Off (the default): the metadata service stamps them with its
  // own clock, as every commit always did. A service without the calls
  // stamps them anyway.
  void SetKeepFileTimes(bool keep) {
    keep_file_times_.store(keep, std::memory_order_relaxed);
  }
  bool keep_file_times() const {
    return keep_file_times_.load(std::memory_order_relaxed);
  }

  // Re-reads the cluster map (server states, new servers) from metadata.
  Status RefreshClusterMap() { return view_->Refresh(); }
  // Same, but only rebuilds placement when the map changed; true if it did.
  Result<bool> RefreshClusterMapIfChanged() {
    return view_->RefreshIfChanged();
  }
  // Epoch of the cluster map the client currently uses.
  uint64_t map_epoch() { return view_->epoch(); }

  ClientCountersSnapshot counters() const {
    ClientCountersSnapshot s = counters_.Snapshot();
    s.stripe_map_hits = maps_.hits();
    s.stripe_map_misses = maps_.misses();
    s.stripe_cache_bytes = stripes_.used();
    s.still_degraded = degraded_ ? degraded_->still_degraded() : 0;
    return s;
  }
  const ec::Codec& codec() const { return *codec_; }

  // The parts, for the repairer (which works on single stripes).
  MetaService& meta() { return *meta_; }
  ClusterView& view() { return *view_; }
  ChunkFanout& fanout() { return *fanout_; }
  StripeLocks& locks() { return locks_; }
  ClientCounters& mutable_counters() { return counters_; }

 private:
  StripeClient(MetaService* meta, ChunkServerSet* servers, Geometry geometry,
               std::unique_ptr<ec::Codec> codec,
               const StripeClientOptions& options);

  MetaService* const meta_;
  const Geometry geometry_;
  const StripeGeometry geo_;
  const std::unique_ptr<ec::Codec> codec_;
  const StripeClientOptions options_;
  ClientCounters counters_;
  std::atomic<bool> keep_file_times_{false};
  StripeMapCache maps_;
  StripeDataCache stripes_;  // outlives the read-ahead loads
  StripeLocks locks_;
  ThreadPool pool_;
  // Destroyed in reverse: the collector drains before the view and pool go.
  std::unique_ptr<ClusterView> view_;
  std::unique_ptr<ChunkFanout> fanout_;
  std::unique_ptr<StripeReader> reader_;
  std::unique_ptr<ThreadPool> ahead_pool_;  // read-ahead loads; before reader_
  std::unique_ptr<VersionCollector> collector_;
  std::unique_ptr<StripeWriteExecutor> writer_;
  // Stopped first by the destructor: its worker uses the parts above.
  std::unique_ptr<DegradedQueue> degraded_;
};

}  // namespace stripefs
