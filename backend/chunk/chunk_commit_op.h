// ChunkStore::CommitOp: one index mutation waiting for the group commit
// (private to the chunk store's .cc files).
//
// The submitting thread owns the op and holds the chunk lock of `id`
// exclusively until the op is done; the commit thread fills in the location
// of new bytes and the status, then sets `done` and signals `done_cv` under
// the queue mutex (so that only the submitters of that batch wake up, and
// the op outlives the signal).
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

// Nanoseconds from `start` to now (the store's timing counters).
inline uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace stripefs
