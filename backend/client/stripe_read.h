// StripeReader: the read path of a volume's erasure-coded stripes.
//
// Fetches only the needed columns of the needed data chunks and rebuilds
// lost ones on the fly from any k surviving chunks (server down, chunk
// missing, CRC error, or no answer within read_deadline: then other chunks
// are read in parallel and whichever completes first serves the read; the
// slow call is abandoned, never waited for). Readers only ever see
// committed versions; a version replaced (and collected) while being read
// is retried on the new one.
//
// Fast path (ReadCellsInto): when every chunk a READ needs is up, not
// known missing and not suspect, and its ChunkService can bound a read
// (ReadChunkIntoBy; RemoteChunkService and ChunkStore can), the
// cells are read straight into the caller's buffer (the FUSE reply, a
// cached stripe): one cell on the calling thread (no hand-off to the pool,
// no buffer, no copy), several in parallel on the pool with the last on the
// calling thread. Each read ends by read_deadline, so the READ waits for
// them all and none writes into the buffer after it returned; a read that
// fails or passes the deadline is counted (slow_chunk_reads, suspect) and
// the READ continues on the general path below, which reads around it and
// does not ask that chunk again.
//
// Whole stripes (parts.stripes, stripe_data_cache.h): a reader whose READ
// starts where its previous one on the file ended is sequential, and gets
// the next `read_ahead_stripes` stripes (with the one it ends inside) read
// whole in the background (parts.ahead) for the READs that follow. A
// stripe with a data chunk known missing or on a server that is down is
// read whole too, reconstructed once, and kept for later readers. Both
// only within the cache's budget; otherwise a READ reads what it needs.
//
// Ownership: borrows everything it is given (owned by StripeClient).
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/stripe_data_cache.h"
#include "backend/client/stripe_geometry.h"
#include "backend/client/stripe_map_cache.h"
#include "backend/client/thread_pool.h"
#include "backend/meta/meta_service.h"
#include "common/status.h"
#include "ec/codec.h"

namespace stripefs {

class StripeReader {
 public:
  struct Parts {
    MetaService* meta;
    const ec::Codec* codec;
    ClusterView* view;
    ThreadPool* pool;
    ClientCounters* counters;
    StripeMapCache* maps;  // the stripe map is looked up here first
    StripeDataCache* stripes = nullptr;  // null: no whole-stripe reads
    ThreadPool* ahead = nullptr;         // runs read-ahead loads
  };
  StripeReader(const Parts& parts, StripeGeometry geometry,
               std::chrono::milliseconds read_deadline,
               uint32_t read_ahead_stripes = 0)
      : p_(parts),
        geo_(geometry),
        read_deadline_(read_deadline),
        read_ahead_stripes_(p_.stripes && p_.ahead ? read_ahead_stripes : 0) {}

  // Reads min(out.size(), file_size - offset) bytes at `offset` (0 at or
  // past EOF); holes read as zeros. Returns the byte count. The stripe map
  // comes from the cache; a miss reads up to kStripeMapWindow stripes of it
  // (not past EOF) in one metadata call, so sequential readers hit after that.
  Result<size_t> Read(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                      uint64_t file_size);

  // Read without any blocking call, for a thread that must not wait (a
  // FUSE io-uring queue thread): the stripe map only from the cache, each
  // stripe from the whole-stripe cache (a load still in flight is not
  // waited for) or its cells with ChunkService::TryReadChunkInto (in
  // process: page cache and index in memory; a remote service says
  // WouldBlock). No metadata call, no RPC, no pool hand-off for the read,
  // no lock wait. Anything else (map not cached, degraded stripe, a chunk
  // that is not in memory or fails) is WouldBlock, with nothing visible
  // changed: no counter, no stream state, no read-ahead, no suspect mark
  // (`out` holds unspecified bytes); the caller then calls Read, which
  // deals with it (and counts errors once). Served: the same bytes as
  // Read, counted the same way, and it starts the same read-ahead (queued
  // on the read-ahead pool, not waited for).
  Result<size_t> TryRead(uint64_t ino, uint64_t offset, std::span<uint8_t> out,
                         uint64_t file_size);

  // Reads columns [lo, hi) of the chunk indices `want` of version `sv`
  // (out[j] for want[j]), reconstructing the ones that cannot be read from
  // k survivors. Used by the write path for read-modify-write.
  Status ReadColumns(uint64_t ino, const StripeVersion& sv,
                     const ChunkLayout& layout, const std::vector<int>& want,
                     uint32_t lo, uint32_t hi,
                     std::vector<std::vector<uint8_t>>* out);

  // One chunk's own column window (ReadWindows): columns [lo, hi) of chunk
  // `index` (data or parity) into `dst`, which holds hi - lo bytes and is
  // owned by the caller.
  struct WindowRead {
    uint32_t index = 0;
    uint32_t lo = 0;
    uint32_t hi = 0;
    uint8_t* dst = nullptr;
  };
  // Reads every window of `reads` (lo < hi <= the chunk length; windows of
  // one chunk disjoint, a chunk may have several) of version `sv` in one
  // parallel round per 32 windows, however many distinct windows there
  // are: the parity-delta write reads each touched cell's window and the
  // parity windows this way. When a chunk
  // cannot be read that way (missing, down, suspect, failed, or its service
  // cannot bound reads), the windows are read again through ReadColumns,
  // one call per distinct window, reconstructing what cannot be read (a
  // chunk that failed is not asked again). On error the contents of the
  // dst buffers are unspecified. Thread-safe like ReadColumns.
  Status ReadWindows(uint64_t ino, const StripeVersion& sv,
                     const ChunkLayout& layout,
                     std::span<const WindowRead> reads);

  // The server to read chunk `index` of `sv` from directly (the fast path
  // of ReadWindows), or null when the general path must read around it:
  // missing from the version, server unusable, or suspect of being slow.
  ChunkService* DirectSource(const StripeVersion& sv, const ChunkLayout& layout,
                             uint32_t index) const;
  // When a direct read started now gives up (read_deadline; max() if none).
  std::chrono::steady_clock::time_point DirectDeadline() const;

 private:
  // One cell's columns [span.lo, span.hi) and where they go.
  struct CellRead {
    CellSpan span;
    uint8_t* dst = nullptr;
  };
  static constexpr size_t kMaxCells = 32;  // chunk masks are 32 bits
  enum class CellsOutcome {
    kRead,      // every cell is in place
    kNotTried,  // a chunk is missing, down, suspect, or its service cannot
                // bound reads: use the general path
    kFailed,    // some reads failed (counted; their errors in *known)
  };
  // The fast path: every cell read straight into its dst with
  // ReadChunkIntoBy (bounded by read_deadline), in parallel, the last on
  // this thread; no buffer, no copy, no reconstruction. *known gets the
  // errors per chunk index for ReadColumnsAround.
  CellsOutcome ReadCellsInto(uint64_t ino, const StripeVersion& sv,
                             const ChunkLayout& layout,
                             std::span<const CellRead> cells,
                             std::vector<Status>* known);
  // The fast path of a degraded stripe's data: each data column whose chunk
  // is a DirectSource straight into data + i * chunk_len, one parity column
  // per other data column into a scratch buffer (ReadCellsInto), then those
  // data columns reconstructed in place. No vector per chunk, no zero-fill,
  // no copy. kNotTried when too few chunks are direct sources.
  CellsOutcome ReadDataAround(uint64_t ino, const StripeVersion& sv,
                              const ChunkLayout& layout, uint8_t* data,
                              std::vector<Status>* known);
  // ReadColumns around chunks that failed already (`known`, per chunk
  // index; empty: none): they are not asked again.
  Status ReadColumnsAround(uint64_t ino, const StripeVersion& sv,
                           const ChunkLayout& layout,
                           const std::vector<int>& want, uint32_t lo,
                           uint32_t hi, std::vector<std::vector<uint8_t>>* out,
                           std::span<const Status> known);
  // The committed versions of stripes [first, last] (holes omitted).
  Result<std::vector<StripeVersion>> StripeMap(uint64_t ino, uint64_t first,
                                               uint64_t last,
                                               uint64_t file_size);
  // Reads stripe bytes [a, b) of committed stripe `sv` into dst.
  Status ReadStripe(uint64_t ino, StripeVersion sv, uint64_t a, uint64_t b,
                    uint8_t* dst);
  // Same, from the whole-stripe cache when the stripe is there or being
  // loaded, or is degraded (then loaded whole here); else ReadStripe.
  Status ReadStripeCached(uint64_t ino, const StripeVersion& sv, uint64_t a,
                          uint64_t b, uint8_t* dst);
  // TryRead of stripe bytes [a, b) of `sv` into dst: OK or WouldBlock.
  Status TryReadStripe(uint64_t ino, const StripeVersion& sv, uint64_t a,
                       uint64_t b, uint8_t* dst);
  // Every data column of `sv`, reconstructed if need be; null on failure.
  CachedStripePtr LoadStripe(uint64_t ino, const StripeVersion& sv);
  // A data chunk of `sv` is known missing or its server is not up.
  bool Degraded(uint64_t ino, const StripeVersion& sv) const;
  // Records the READ [offset, end) of `ino`; true if it starts where the
  // previous one ended.
  bool Sequential(uint64_t ino, uint64_t offset, uint64_t end);
  // Starts background loads of stripes [from, to] whose map is cached.
  void ReadAhead(uint64_t ino, uint64_t from, uint64_t to);
  // Read and TryRead: a sequential READ [offset, offset + total) of a
  // file of `file_size` bytes queues the read-ahead window behind it.
  void ReadAheadAfter(uint64_t ino, uint64_t offset, uint64_t total,
                      uint64_t file_size);
  // Read and TryRead: walks the stripes of [offset, offset + total),
  // zeroing holes (absent from `stripes`, sorted) and short stripes, and
  // calls read(sv, a, b, dst) for each stored one; stops at its first error.
  using StripeRead = std::function<Status(const StripeVersion& sv, uint64_t a,
                                          uint64_t b, uint8_t* dst)>;
  Status ForEachStripeRead(uint64_t offset, uint64_t total,
                           const std::vector<StripeVersion>& stripes,
                           std::span<uint8_t> out, const StripeRead& read);
  void CopyOut(const CachedStripe& c, uint64_t a, uint64_t b,
               uint8_t* dst) const;

  const Parts p_;
  const StripeGeometry geo_;
  const std::chrono::milliseconds read_deadline_;
  const uint32_t read_ahead_stripes_;
  std::mutex streams_mu_;
  std::unordered_map<uint64_t, uint64_t> next_offset_;  // ino -> expected
};

}  // namespace stripefs
