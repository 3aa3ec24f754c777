// The chunk store's group commit (private to backend/chunk/; the ChunkStore
// members Submit, SubmitAll, CommitLoop, IndexLoop, CommitBatch, ... are in
// group_commit.cc) and the op it commits, CommitOp.
//
// Durability contract. Submit(op) / SubmitAll(ops) return once the op is
// durable or failed, never before:
// - an op with new bytes has them written to a fresh segment extent by its
//   submitter (WriteData / WriteDataBatch) before it is queued;
// - the commit thread takes every op queued while the previous batch was
//   syncing and makes them durable together: ONE synced RocksDB WriteBatch
//   (their entries, plus a pending record naming each entry with new bytes
//   and the entry it replaced) on the index thread and, at the same time,
//   one fdatasync per segment the batch wrote on the commit thread;
// - an op is acknowledged (status OK, `done`) only when both are durable;
//   an op whose segment did not sync has its entry rolled back (RollBack,
//   synced) and fails; a failed index write fails the whole batch;
// - the batch's pending record is deleted by a later WriteBatch (or at
//   Close), so after a crash Open verifies every entry a record names and
//   rolls back those whose bytes did not reach the disk (chunk_store.h,
//   "Crash rules");
// - holes (bytes no version references any more) are punched only after
//   the op is acknowledged, by its submitter (PunchHoles), never by the
//   commit thread.
// The version cache is updated under each op's chunk lock, which its
// submitter holds until the op is done (UpdateVersionCache).
//
// Limits: a batch is whatever queued up meanwhile (no cap); the index
// thread runs one WriteBatch at a time. Thread-safety: Submit/SubmitAll
// from any thread; the queue, index job and stop flag are guarded by
// queue_mu_; next_pending_, confirmed_pending_ and the index reserve
// belong to the commit thread.
//
// CommitOp: the submitting thread owns the op and holds the chunk lock of
// `id` exclusively until the op is done; the commit thread fills in the
// location of new bytes and the status, then sets `done` and signals
// `done_cv` under the queue mutex (so that only the submitters of that
// batch wake up, and the op outlives the signal).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_store.h"

namespace stripefs {

// A value an op lets go of once it is committed.
struct ChunkStore::Freed {
  uint64_t version = 0;
  ChunkIndexValue value;
};

// A segment byte range that no version references any more: found by the
// commit thread (ApplyLive), punched later by PunchHoles. `segment` keeps
// the file open (a removed segment's file is unlinked, never reused).
struct ChunkStore::Hole {
  std::shared_ptr<SegmentFile> segment;
  uint64_t seq = 0;
  uint64_t lo = 0;
  uint64_t hi = 0;
};

struct ChunkStore::CommitOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  ChunkId id;
  // kPut: every key gets `value`; kDelete: every key is removed.
  std::vector<std::string> keys;
  // kPut with new bytes: they go to a fresh extent, which becomes the pieces
  // of `value` at `windows` (whose other pieces are `kept_pieces`; Submit
  // sets value.pieces). Without: `value` is stored as it is.
  bool has_data = false;
  std::span<const uint8_t> data;
  // A patch's pieces in the extent: (chunk offset, length) of each, back to
  // back in `data`, sorted. Empty: one piece of all of `data` at offset 0.
  std::vector<PatchRange> windows;
  std::vector<ChunkPiece> kept_pieces;
  ChunkIndexValue value;
  // The values the op replaces or deletes, and those of every other version
  // of `id` (which it leaves as they are): together they say which segment
  // bytes stop being referenced (ApplyLive).
  std::vector<Freed> freed;
  std::vector<ChunkIndexValue> others;
  // Where the bytes went (set by Submit; segment 0: no extent).
  SegmentExtent extent;
  // A compaction move: the old extents are not punched (their segment goes).
  bool relocation = false;

  // Set by the commit thread before `done`: ranges this op left
  // unreferenced. Submit/SubmitAll punch them before returning unless
  // `punch_later` (then the caller does, after releasing its chunk locks).
  std::vector<Hole> holes;
  bool punch_later = false;

  Status status;
  // When Submit queued it (timing counters only).
  std::chrono::steady_clock::time_point queued_at;
  bool done = false;                // guarded by the queue mutex
  std::condition_variable done_cv;  // with the queue mutex
};

// One op of an ApplyChunkOps batch (chunk_store.cc, chunk_store_write.cc).
struct ChunkStore::BatchOp {
  CommitOp op;
  AlignedBytes data;  // a patch's new blocks, or a whole patch's chunk
  bool existed = false;
  bool queued = false;
  bool whole = false;  // a patch stored as a whole new version
};

// Nanoseconds from `start` to now (the store's timing counters).
inline uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace stripefs
