// StripeClient: the erasure-coded data path of a volume.
//
// Writes: each stripe touched by a write gets a new version: k data + m
// parity chunks are written in parallel to the servers placement chooses,
// then the version is committed in the metadata service by compare-and-swap.
// A write covering a whole stripe is encoded directly; a partial one reads
// the old data first (read-modify-write), or, when cheaper, only the touched
// data chunks and the parity (parity-delta update). Up to m failed chunk
// writes commit the stripe as degraded (missing chunks recorded); more fail
// with EIO and the previous version stays the committed one. Old versions'
// chunks are deleted after the commit. No torn stripes: readers only ever
// see committed versions.
//
// Reads fetch only the needed byte ranges of the data chunks and rebuild
// lost ones on the fly from any k surviving chunks (server down, chunk
// missing, CRC error, or no answer within options.read_deadline: then the
// other chunks are read in parallel and whichever completes first serves
// the read; the slow call is abandoned, never waited for).
//
// Cluster map: re-read from metadata every options.map_refresh_interval on
// a background thread (sooner after a transport error), so servers the
// metad health monitor marks down are skipped without a call; a read or
// write that fails re-reads the map at once and retries if it changed.
//
// Ownership: borrows the MetaService and ChunkServerSet (they must outlive
// the client); owns its codec, placement and I/O threads.
// Thread-safety: all public methods may be called concurrently. Writes to
// one stripe through one client are serialized by a striped lock; writers in
// different clients are serialized by the commit CAS (the loser retries).
// Known limit: garbage collection keeps only the newest version, so two
// clients racing on the same stripe can make one retry spuriously fail.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "backend/client/chunk_server_set.h"
#include "backend/client/client_counters.h"
#include "backend/client/placement.h"
#include "backend/client/thread_pool.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "ec/codec.h"

namespace stripefs {

struct StripeClientOptions {
  size_t io_threads = 16;
  int commit_retries = 16;       // CAS conflicts before giving up (EAGAIN)
  bool parity_delta = true;      // use parity-delta updates when they read less
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
};

class StripeClient {
 public:
  static Result<std::unique_ptr<StripeClient>> Create(
      MetaService* meta, ChunkServerSet* servers,
      const StripeClientOptions& options = {});
  ~StripeClient();

  const Geometry& geometry() const { return geometry_; }
  uint64_t stripe_size() const { return geometry_.stripe_size(); }

  // Writes `data` at byte `offset` of file `ino`; returns once every touched
  // stripe is committed (durable). Raises the file size to offset+size, but
  // never past `size_cap` (a caller with lower stripes still in flight keeps
  // EOF below them and raises it later, see StripeWriter).
  Status Write(uint64_t ino, uint64_t offset, std::span<const uint8_t> data,
               uint64_t size_cap = UINT64_MAX);

  // Reads min(out.size(), file_size - offset) bytes at `offset` (0 at or past
  // EOF); holes read as zeros. Returns the byte count.
  Result<size_t> Read(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                      uint64_t file_size);

  // Sets the size of `ino` (currently `old_size`) to `new_size`. Shrinking
  // first rewrites the new last stripe with the bytes past new_size zeroed,
  // so growing later reads zeros there; dropped stripes are deleted.
  Result<InodeAttr> Truncate(uint64_t ino, uint64_t old_size,
                             uint64_t new_size);

  // Deletes the chunks of obsolete stripe versions on every server that may
  // hold them (best effort; failures are counted, scrub finds leftovers).
  void DeleteStripes(const std::vector<ObsoleteStripe>& obsolete);

  // Rebuilds the chunks of the committed stripe `sv` of `ino` that are
  // missing (missing_mask, unreadable, or not on the server placement now
  // names) onto the placement's servers, then clears the mask. With
  // `verify`, every chunk is read whole and parity is re-checked (scrub).
  // Returns the number of chunks rewritten.
  Result<uint32_t> RepairStripe(uint64_t ino, const StripeVersion& sv,
                                bool verify);

  // Re-reads the cluster map (server states, new servers) from metadata.
  Status RefreshClusterMap();
  // Same, but only rebuilds placement when the map changed; true if it did.
  Result<bool> RefreshClusterMapIfChanged();
  // Epoch of the cluster map the client currently uses.
  uint64_t map_epoch();

  ClientCountersSnapshot counters() const { return counters_.Snapshot(); }
  const ec::Codec& codec() const { return *codec_; }

 private:
  struct Layout;  // where each chunk of a stripe lives right now
  struct ChunkRead;

  StripeClient(MetaService* meta, ChunkServerSet* servers, Geometry geometry,
               std::unique_ptr<ec::Codec> codec,
               const StripeClientOptions& options);

  Layout LayoutFor(uint64_t ino, uint64_t stripe);
  Result<uint64_t> NextVersion();
  // True (and counted as a commit conflict) when the stripe's committed
  // version is no longer `base`: another client wrote it since we read it.
  bool MovedOn(uint64_t ino, uint64_t stripe, const StripeVersion& base);
  Result<StripeVersion> CurrentStripe(uint64_t ino, uint64_t stripe,
                                      bool* exists);

  // Writes bytes [off, off+data.size()) of one stripe; `zero_from` (if not
  // UINT32_MAX) additionally zeroes [zero_from, S) and sets the chunk length
  // to fit it (truncate). `min_file_size` is passed to CommitStripe.
  Status WriteStripe(uint64_t ino, uint64_t stripe, uint64_t off,
                     std::span<const uint8_t> data, uint64_t min_file_size,
                     uint64_t zero_from);

  // Reads columns [lo, hi) of the chunk indices `want` of version `sv`,
  // reconstructing the ones that cannot be read from k survivors.
  Status ReadColumns(uint64_t ino, const StripeVersion& sv,
                     const Layout& layout, const std::vector<int>& want,
                     uint32_t lo, uint32_t hi,
                     std::vector<std::vector<uint8_t>>* out);

  // Runs `op` on the service of every chunk index in `indices` in parallel;
  // returns the mask of indices that failed (or whose server is unusable),
  // counts them, keeps the most telling error in *error, and asks for a map
  // refresh after transport errors.
  uint32_t RunChunkOps(const Layout& layout, const std::vector<int>& indices,
                       const std::function<Status(ChunkService*, uint32_t)>& op,
                       Status* error);
  // Writes chunk buffers (index -> data) as version `version`; returns the
  // mask of indices that failed, and the most telling error in *error.
  uint32_t WriteChunks(
      uint64_t ino, uint64_t stripe, uint64_t version, const Layout& layout,
      const std::vector<std::pair<int, std::span<const uint8_t>>>& chunks,
      Status* error);
  // Deletes all versions but `keep` of the stripe's chunks (0: all).
  void DeleteOtherVersions(uint64_t ino, uint64_t stripe, uint64_t keep,
                           const Layout& layout);
  // Deletes exactly `version` of the chunks whose index bit is in `mask`.
  void DeleteVersion(uint64_t ino, uint64_t stripe, uint64_t version,
                     const Layout& layout, uint32_t mask);
  std::mutex& StripeLock(uint64_t ino, uint64_t stripe);
  // Servers a chunk read recently found slow (past read_deadline) or
  // unreachable: reads still ask them but read other chunks at once instead
  // of waiting a deadline first, until one answers or kSuspectWindow ends.
  bool IsSuspect(uint32_t server);
  void MarkSuspect(uint32_t server, bool suspect);
  // Asks the refresher thread to re-read the map soon (non-blocking).
  void RequestMapRefresh();
  void RefreshLoop();

  MetaService* const meta_;
  ChunkServerSet* const servers_;
  const Geometry geometry_;
  const std::unique_ptr<ec::Codec> codec_;
  const StripeClientOptions options_;
  ThreadPool pool_;
  ClientCounters counters_;

  std::mutex map_mu_;
  ClusterMap map_;                              // guarded by map_mu_
  std::shared_ptr<const Placement> placement_;  // guarded by map_mu_

  static constexpr size_t kStripeLocks = 1024;
  std::mutex stripe_locks_[kStripeLocks];

  std::mutex version_mu_;
  uint64_t next_version_ = 0;  // guarded by version_mu_
  uint64_t version_limit_ = 0;

  std::mutex suspect_mu_;
  std::map<uint32_t, std::chrono::steady_clock::time_point>
      suspect_until_;  // guarded by suspect_mu_

  std::mutex refresh_mu_;
  std::condition_variable refresh_cv_;
  bool refresh_stopping_ = false;   // guarded by refresh_mu_
  bool refresh_requested_ = false;  // guarded by refresh_mu_
  std::thread refresher_;           // last: stopped first (destructor)
};

}  // namespace stripefs
