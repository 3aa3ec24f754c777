// The chunk store's group commit and its compactor (see chunk_store.h).
#include <fcntl.h>
#include <linux/falloc.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/chunk/chunk_commit_op.h"
#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/uring_file_io.h"
#include "common/rocks_glue.h"

namespace stripefs {
namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<uint8_t, FreeDeleter>;

// Staging buffers up to this size stay with their writer thread (a fresh
// 1 MiB allocation per chunk costs an mmap and 256 page faults).
constexpr uint64_t kKeptStagingBytes = uint64_t{4} << 20;

// `bytes` (a multiple of kSegmentAlign) of kSegmentAlign-aligned memory
// holding `data` and then zeros: what O_DIRECT writes. Valid until the
// calling thread stages again.
uint8_t* Stage(std::span<const uint8_t> data, uint64_t bytes,
               AlignedBuf* oversize) {
  thread_local AlignedBuf kept;
  thread_local uint64_t kept_bytes = 0;
  uint8_t* p;
  if (bytes > kKeptStagingBytes) {
    oversize->reset(
        static_cast<uint8_t*>(std::aligned_alloc(kSegmentAlign, bytes)));
    p = oversize->get();
  } else {
    if (kept_bytes < bytes) {
      kept.reset(static_cast<uint8_t*>(
          std::aligned_alloc(kSegmentAlign, kKeptStagingBytes)));
      kept_bytes = kKeptStagingBytes;
    }
    p = kept.get();
  }
  if (p == nullptr) std::abort();
  std::memcpy(p, data.data(), data.size());
  std::memset(p + data.size(), 0, bytes - data.size());
  return p;
}

}  // namespace

bool ChunkStore::stopping() {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return stop_;
}

Status ChunkStore::Submit(CommitOp* op) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  if (stop_) return Status::Unavailable("chunk store " + dir_ + " is closing");
  op->done = false;
  op->status = Status::Ok();
  op->extent = {};
  if (op->has_data) {
    // The bytes go down on the submitting thread, so writers keep the disk
    // busy in parallel while the commit thread syncs.
    lock.unlock();
    STRIPEFS_RETURN_IF_ERROR(WriteData(op));
    lock.lock();
    if (stop_) {
      segments_->Settle(op->extent);
      return Status::Unavailable("chunk store " + dir_ + " is closing");
    }
  }
  queue_.push_back(op);
  queue_cv_.notify_one();
  op->done_cv.wait(lock, [op] { return op->done; });
  return op->status;
}

Status ChunkStore::SubmitAll(const std::vector<CommitOp*>& ops) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  if (stop_) return Status::Unavailable("chunk store " + dir_ + " is closing");
  for (CommitOp* op : ops) {
    op->done = false;
    op->status = Status::Ok();
    op->extent = {};
    queue_.push_back(op);
  }
  queue_cv_.notify_one();
  for (CommitOp* op : ops) op->done_cv.wait(lock, [op] { return op->done; });
  for (const CommitOp* op : ops) {
    if (!op->status.ok()) return op->status;
  }
  return Status::Ok();
}

void ChunkStore::CommitLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {  // stopping, nothing left
      syncer_done_ = true;
      synced_cv_.notify_all();
      return;
    }
    // Everything that arrived while the previous batch was syncing.
    std::vector<CommitOp*> batch;
    batch.swap(queue_);
    lock.unlock();
    SyncBatchData(batch);
    lock.lock();
    synced_.insert(synced_.end(), batch.begin(), batch.end());
    synced_cv_.notify_one();
  }
}

void ChunkStore::IndexLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    synced_cv_.wait(lock, [this] { return syncer_done_ || !synced_.empty(); });
    if (synced_.empty()) return;
    // Every batch whose data synced meanwhile: one WriteBatch for them all.
    std::vector<CommitOp*> batch;
    batch.swap(synced_);
    lock.unlock();
    CommitBatch(batch);
    lock.lock();
    // Wakes only this batch's submitters (one waiter per op). Signalled
    // under the mutex: a submitter may destroy its op as soon as it sees
    // `done`.
    for (CommitOp* op : batch) {
      op->done = true;
      op->done_cv.notify_one();
    }
  }
}

Status ChunkStore::WriteData(CommitOp* op) {
  const uint64_t bytes = SegmentExtentBytes(op->data.size());
  STRIPEFS_ASSIGN_OR_RETURN(op->extent, segments_->Allocate(bytes));
  op->value.in_segment = true;
  op->value.segment = op->extent.segment;
  op->value.offset = op->extent.offset;
  if (bytes == 0) return Status::Ok();
  std::shared_ptr<SegmentFile> f = segments_->Get(op->extent.segment);
  AlignedBuf oversize;
  uint8_t* buf = Stage(op->data, bytes, &oversize);
  Status st = io_->Write(f->write_fd.get(), buf, bytes, op->extent.offset);
  if (!st.ok()) {
    segments_->Settle(op->extent);
    op->extent = {};
    return st.Annotate("writing segment " + f->path);
  }
  return Status::Ok();
}

void ChunkStore::SyncBatchData(const std::vector<CommitOp*>& batch) {
  std::map<uint64_t, std::shared_ptr<SegmentFile>> touched;
  for (const CommitOp* op : batch) {
    if (op->extent.bytes > 0) {
      touched.emplace(op->extent.segment, segments_->Get(op->extent.segment));
    }
  }
  // One fdatasync per touched segment, before any entry points into it.
  for (const auto& [seq, f] : touched) {
    Status st = io_->DataSync(f->write_fd.get());
    data_syncs_.fetch_add(1, std::memory_order_relaxed);
    if (st.ok()) continue;
    for (CommitOp* op : batch) {
      if (op->extent.bytes > 0 && op->extent.segment == seq) {
        op->status = st.Annotate("syncing segment " + f->path);
      }
    }
  }
}

void ChunkStore::CommitBatch(const std::vector<CommitOp*>& batch) {
  rocksdb::WriteBatch wb;
  size_t ready = 0;
  for (CommitOp* op : batch) {
    if (!op->status.ok()) continue;
    ++ready;
    if (op->kind == CommitOp::Kind::kPut) {
      const std::string value = EncodeChunkValue(op->value);
      for (const auto& k : op->keys) wb.Put(k, value);
    } else {
      for (const auto& k : op->keys) wb.Delete(k);
    }
  }
  if (ready > 0) {
    // One synced WriteBatch for the whole batch: all of it or none of it.
    Status st = RocksWriteSynced(db_.get(), &wb, "chunk index of " + dir_);
    if (st.code() == ENOSPC && ReleaseIndexReserve()) {
      st = RocksWriteSynced(db_.get(), &wb, "chunk index of " + dir_);
    }
    index_syncs_.fetch_add(1, std::memory_order_relaxed);
    for (CommitOp* op : batch) {
      if (op->status.ok()) op->status = st;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const CommitOp& op = *batch[i];
    if (!op.status.ok()) continue;
    if (op.kind == CommitOp::Kind::kPut && op.value.in_segment) {
      segments_->AddLive(op.value.segment, SegmentExtentBytes(op.value.length),
                         op.keys.size());
    }
    Release(op);
  }
  for (const CommitOp* op : batch) {
    if (op->extent.segment != 0) segments_->Settle(op->extent);
  }
  bool freed = false;
  for (const CommitOp* op : batch) {
    freed |= op->status.ok() && op->kind == CommitOp::Kind::kDelete;
  }
  if (!reserve_held_ && freed) RestoreIndexReserve();
  batches_.fetch_add(1, std::memory_order_relaxed);
  ops_.fetch_add(batch.size(), std::memory_order_relaxed);
}

bool ChunkStore::ReleaseIndexReserve() {
  if (!reserve_held_ || ::ftruncate(reserve_fd_.get(), 0) != 0) return false;
  reserve_held_ = false;
  chunk_paths::Log(dir_, "disk full: gave up the index reserve to commit");
  return true;
}

void ChunkStore::RestoreIndexReserve() {
  if (!reserve_fd_.valid()) return;
  reserve_held_ =
      ::fallocate(reserve_fd_.get(), 0, 0,
                  static_cast<off_t>(chunk_paths::kIndexReserveBytes)) == 0;
  if (!reserve_held_) (void)::ftruncate(reserve_fd_.get(), 0);
}

void ChunkStore::Release(const CommitOp& op) {
  for (const Freed& f : op.freed) {
    if (!f.value.in_segment) {
      // A legacy file replaced by a rewrite (deletes unlinked theirs).
      if (op.kind == CommitOp::Kind::kPut) {
        ::unlink(
            chunk_paths::LegacyChunkPath(data_dir_, op.id, f.version).c_str());
      }
      continue;
    }
    const uint64_t bytes = SegmentExtentBytes(f.value.length);
    segments_->RemoveLive(f.value.segment, bytes, 1);
    if (!options_.punch_holes || op.relocation || bytes == 0) continue;
    // Clones share extents: punch only what no remaining version points to.
    bool shared = false;
    const std::string prefix = EncodeChunkIdPrefix(op.id);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
    for (it->Seek(prefix);
         !shared && it->Valid() && it->key().starts_with(prefix); it->Next()) {
      auto v = DecodeChunkValue(
          std::string_view(it->value().data(), it->value().size()));
      shared = v.ok() && v->in_segment && v->segment == f.value.segment &&
               v->offset == f.value.offset;
    }
    if (shared || !it->status().ok()) continue;
    std::shared_ptr<SegmentFile> seg = segments_->Get(f.value.segment);
    if (seg && ::fallocate(seg->write_fd.get(),
                           FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           static_cast<off_t>(f.value.offset),
                           static_cast<off_t>(bytes)) == 0) {
      holes_.fetch_add(1, std::memory_order_relaxed);
      segments_->NotePunched(f.value.segment, bytes);
    }
    // Without hole punching the compactor gets the space back.
  }
}

void ChunkStore::CompactLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stop_) break;
    lock.unlock();
    {
      std::lock_guard<std::mutex> one(compact_mu_);
      CompactionReport rep;
      for (uint64_t seq :
           segments_->CompactionCandidates(options_.compact_live_fraction)) {
        if (stopping()) break;
        CompactSegment(seq, options_.compact_bytes_per_sec, &rep);
      }
    }
    lock.lock();
  }
}

Result<CompactionReport> ChunkStore::Compact(bool everything) {
  std::lock_guard<std::mutex> one(compact_mu_);
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
  // The extents of `seq` that entries point to (a full index scan: the index
  // has no by-segment order).
  std::map<std::pair<ChunkId, uint64_t>, std::vector<uint64_t>> extents;
  Status scan = ScanIndex(
      [&](const ChunkId& id, uint64_t version, const ChunkIndexValue* v) {
        if (v == nullptr || !v->in_segment || v->segment != seq) return;
        extents[{id, v->offset}].push_back(version);
      });
  if (!scan.ok()) return;  // try again next round
  const auto start = std::chrono::steady_clock::now();
  const uint64_t moved_before = rep->bytes_moved;
  for (const auto& [where, versions] : extents) {
    if (stopping()) return;
    RelocateExtent(where.first, seq, where.second, versions, rep);
    if (bytes_per_sec == 0) continue;
    // The I/O budget: sleep until the bytes moved so far fit in it.
    const auto due =
        start + std::chrono::microseconds((rep->bytes_moved - moved_before) *
                                          1000000 / bytes_per_sec);
    std::unique_lock<std::mutex> lock(queue_mu_);
    stop_cv_.wait_until(lock, due, [this] { return stop_; });
  }
  ++rep->segments_compacted;
}

void ChunkStore::RelocateExtent(const ChunkId& id, uint64_t seq,
                                uint64_t offset,
                                const std::vector<uint64_t>& versions,
                                CompactionReport* rep) {
  std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
  CommitOp op;
  op.id = id;
  op.relocation = true;
  op.has_data = true;
  uint64_t first = 0;
  for (uint64_t version : versions) {
    bool found = false;
    ChunkIndexValue v;
    if (!GetEntry(id, version, &found, &v).ok() || !found || !v.in_segment ||
        v.segment != seq || v.offset != offset) {
      continue;  // deleted or rewritten since the scan
    }
    if (op.keys.empty()) {
      first = version;
      op.value = v;
    }
    op.keys.push_back(EncodeChunkKey(id, version));
    op.freed.push_back({version, std::move(v)});
  }
  if (op.keys.empty()) return;
  std::vector<uint8_t> data;
  if (!ReadVerified(id, first, op.value, &data).ok()) {
    ++rep->unreadable;  // left where it is (scrub and repair deal with it)
    return;
  }
  op.data = data;
  if (!Submit(&op).ok()) return;
  relocated_.fetch_add(op.keys.size(), std::memory_order_relaxed);
  ++rep->chunks_moved;
  rep->bytes_moved += data.size();
}

}  // namespace stripefs
