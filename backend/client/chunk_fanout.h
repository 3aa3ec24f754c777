// ChunkFanout: runs one operation on several chunks of a stripe in parallel
// (one per chunk index, each on the server its ChunkLayout names) and
// reduces the outcome to a mask of failed indices plus the most telling
// error. Shared by the write path, deletion and repair. RunBatch sends the
// chunk writes of many stripes as one ApplyChunkOps call per server (all
// servers in parallel), so a server takes a whole wave of an fsync in one
// request and one group commit.
//
// Ownership: borrows the ThreadPool, ClusterView and ClientCounters.
// Thread-safety: all methods may be called concurrently. Calls block until
// every operation of the call has finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "backend/client/client_counters.h"
#include "backend/client/cluster_view.h"
#include "backend/client/thread_pool.h"
#include "common/status.h"

namespace stripefs {

// Keeps in *kept the error a user can act on: ENOSPC, then anything but
// EHOSTDOWN.
void KeepWorseError(Status* kept, const Status& st);

class ChunkFanout {
 public:
  ChunkFanout(ThreadPool* pool, ClusterView* view, ClientCounters* counters)
      : pool_(pool), view_(view), counters_(counters) {}

  using ChunkOp = std::function<Status(ChunkService*, uint32_t index)>;

  // Runs `op` for every chunk index in `indices`; returns the mask of those
  // that failed (or whose server is unusable), counts them as chunk write
  // errors, keeps the worst error in *error and asks the view for a map
  // refresh after transport errors.
  uint32_t Run(const ChunkLayout& layout, const std::vector<int>& indices,
               const ChunkOp& op, Status* error);

  // Writes chunk buffers (index -> bytes) as `version` of the stripe.
  uint32_t WriteChunks(
      uint64_t ino, uint64_t stripe, uint64_t version,
      const ChunkLayout& layout,
      const std::vector<std::pair<int, std::span<const uint8_t>>>& chunks,
      Status* error);

  // Best effort, counted as gc_chunk_deletes / gc_errors; what fails is an
  // orphan that scrub collects.
  // Deletes exactly `version` of the chunks whose index bit is in `mask`.
  void DeleteVersion(uint64_t ino, uint64_t stripe, uint64_t version,
                     const ChunkLayout& layout, uint32_t mask);

  // One chunk write of a batch: `op` on chunk op.id.index of the stripe
  // laid out by *layout (borrowed for the call).
  struct BatchOp {
    const ChunkLayout* layout = nullptr;
    ChunkWriteOp op;
  };
  // Runs every op of `ops`: one ApplyChunkOps call per server for its
  // patches and clones, one WriteChunk call per whole chunk (kWrite: sent
  // from the caller's buffer, no copy into a batch frame), all in parallel.
  // Returns one Status per op, in order (an op whose server is unusable gets
  // that reason). Counts nothing: each stripe reduces its own ops with Reduce.
  std::vector<Status> RunBatch(std::span<const BatchOp> ops);
  // One chunk read of a batch: `read` from the server `svc` (borrowed).
  struct BatchRead {
    ChunkService* svc = nullptr;
    ChunkRangeRead read;
  };
  // Runs every read of `reads`: one ReadChunkRanges call per server, all
  // servers in parallel, each bounded by `deadline`. Returns one Status per
  // read, in order. Counts nothing: the caller decides what a failed read
  // means (e.g. reads it again around the chunk).
  std::vector<Status> ReadBatch(std::span<const BatchRead> reads,
                                std::chrono::steady_clock::time_point deadline);
  // What Run does with the outcomes of its ops: the mask of the indices
  // whose Status failed, counted as chunk write errors, the worst error
  // kept in *error, a map refresh asked for after transport errors.
  uint32_t Reduce(const std::vector<int>& indices,
                  const std::vector<Status>& errs, Status* error);

  ThreadPool& pool() { return *pool_; }

 private:
  ThreadPool* const pool_;
  ClusterView* const view_;
  ClientCounters* const counters_;
};

}  // namespace stripefs
