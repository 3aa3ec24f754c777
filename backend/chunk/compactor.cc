// The chunk store's compactor: budgeted background compaction of
// mostly-dead sealed segments (see "Space" in chunk_store.h).
#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/live_space.h"
#include "backend/chunk/uring_file_io.h"
#include "common/rocks_glue.h"

namespace stripefs {

using live_space::HasPieceIn;

void ChunkStore::CompactLoop() {
  UniqueMutexLock lock(&queue_mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock.native(), std::chrono::seconds(1));
    if (stop_) break;
    lock.Unlock();
    {
      MutexLock one(&compact_mu_);
      CompactionReport rep;
      for (uint64_t seq :
           segments_->CompactionCandidates(options_.compact_live_fraction)) {
        if (stopping()) break;
        CompactSegment(seq, options_.compact_bytes_per_sec, &rep);
      }
    }
    lock.Lock();
  }
}

Result<CompactionReport> ChunkStore::Compact(bool everything) {
  MutexLock one(&compact_mu_);
  CompactionReport rep;
  if (everything) segments_->SealActive();
  for (uint64_t seq : segments_->CompactionCandidates(
           everything ? 1.0 : options_.compact_live_fraction)) {
    CompactSegment(seq, 0, &rep);
  }
  segments_->RemoveDead();
  return rep;
}

void ChunkStore::CompactSegment(uint64_t seq, uint64_t bytes_per_sec,
                                CompactionReport* rep) {
  // The chunk ids with a piece in `seq` (a full index scan: the index has no
  // by-segment order).
  std::vector<ChunkId> ids;
  Status scan =
      ScanIndex([&](const ChunkId& id, uint64_t, const ChunkIndexValue* v) {
        if (v == nullptr || !HasPieceIn(*v, seq)) return;
        if (ids.empty() || ids.back() != id) ids.push_back(id);
      });
  if (!scan.ok()) return;  // try again next round
  const auto start = std::chrono::steady_clock::now();
  const uint64_t moved_before = rep->bytes_moved;
  for (const ChunkId& id : ids) {
    if (stopping()) return;
    RelocateChunk(id, seq, rep);
    if (bytes_per_sec == 0) continue;
    // The I/O budget: sleep until the bytes moved so far fit in it.
    const auto due =
        start + std::chrono::microseconds((rep->bytes_moved - moved_before) *
                                          1000000 / bytes_per_sec);
    UniqueMutexLock lock(&queue_mu_);
    stop_cv_.wait_until(lock.native(), due, [this] {
      queue_mu_.AssertHeld();
      return stop_;
    });
  }
  ++rep->segments_compacted;
}

void ChunkStore::RelocateChunk(const ChunkId& id, uint64_t seq,
                               CompactionReport* rep) {
  std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
  std::vector<std::pair<uint64_t, ChunkIndexValue>> all;
  if (!GatherVersions(id, &all).ok()) return;
  // Versions with a piece in `seq`, grouped by identical values (clones of
  // each other): each group is rewritten as one piece, shared by the group.
  // Versions that share only some pieces each get their own copy.
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < all.size(); ++i) {
    if (HasPieceIn(all[i].second, seq)) {
      groups[EncodeChunkValue(all[i].second)].push_back(i);
    }
  }
  for (const auto& [encoded, members] : groups) {
    CommitOp op;
    op.id = id;
    op.relocation = true;
    op.has_data = true;
    op.value = all[members[0]].second;
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::find(members.begin(), members.end(), i) == members.end()) {
        op.others.push_back(all[i].second);
      }
    }
    for (size_t i : members) {
      op.keys.push_back(EncodeChunkKey(id, all[i].first));
      op.freed.push_back({all[i].first, all[i].second});
    }
    std::vector<uint8_t> data;
    if (!ReadVerified(id, all[members[0]].first, op.value, &data).ok()) {
      ++rep->unreadable;  // left where it is (scrub and repair deal with it)
      continue;
    }
    op.data = data;
    if (!Submit(&op).ok()) continue;
    for (size_t i : members) all[i].second = op.value;
    counters_.chunks_relocated.fetch_add(op.keys.size(),
                                         std::memory_order_relaxed);
    ++rep->chunks_moved;
    rep->bytes_moved += data.size();
  }
}

}  // namespace stripefs
