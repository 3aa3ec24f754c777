// The chunk store's group commit (contract in group_commit.h).
#include "backend/chunk/group_commit.h"

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
#include "backend/chunk/uring_file_io.h"
#include "common/rocks_glue.h"

namespace stripefs {

using chunk_paths::Log;

namespace {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

using AlignedBuf = std::unique_ptr<uint8_t, FreeDeleter>;

// Staging buffers up to this size stay with their writer thread (a fresh
// 1 MiB allocation per chunk costs an mmap and 256 page faults).
constexpr uint64_t kKeptStagingBytes = uint64_t{4} << 20;

// `bytes` (a multiple of kSegmentAlign) of kSegmentAlign-aligned memory
// holding `data` and then zeros: what O_DIRECT writes. Data that already is
// that (aligned, `bytes` long: a pooled or page-aligned request cell) is
// returned as is, without a copy; else the copy is valid until the calling
// thread stages again.
// `own` true: the copy always goes to *oversize (valid while it lives).
const uint8_t* Stage(std::span<const uint8_t> data, uint64_t bytes,
                     AlignedBuf* oversize, bool own = false) {
  if (data.size() == bytes &&
      reinterpret_cast<uintptr_t>(data.data()) % kSegmentAlign == 0) {
    return data.data();
  }
  thread_local AlignedBuf kept;
  thread_local uint64_t kept_bytes = 0;
  uint8_t* p;
  if (own || bytes > kKeptStagingBytes) {
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
  MutexLock lock(&queue_mu_);
  return stop_;
}

Status ChunkStore::Submit(CommitOp* op) {
  UniqueMutexLock lock(&queue_mu_);
  if (stop_) return Status::Unavailable("chunk store " + dir_ + " is closing");
  op->done = false;
  op->status = Status::Ok();
  op->extent = {};
  if (op->has_data) {
    // The bytes go down on the submitting thread, so writers keep the disk
    // busy in parallel while the commit thread syncs.
    lock.Unlock();
    STRIPEFS_RETURN_IF_ERROR(WriteData(op));
    lock.Lock();
    if (stop_) {
      segments_->Settle(op->extent);
      return Status::Unavailable("chunk store " + dir_ + " is closing");
    }
  }
  op->queued_at = std::chrono::steady_clock::now();
  queue_.push_back(op);
  queue_cv_.notify_one();
  op->done_cv.wait(lock.native(), [op] { return op->done; });
  lock.Unlock();
  if (!op->punch_later) PunchHoles(&op->holes);
  return op->status;
}

Status ChunkStore::SubmitAll(const std::vector<CommitOp*>& ops) {
  UniqueMutexLock lock(&queue_mu_);
  if (stop_) {
    Status closing = Status::Unavailable("chunk store " + dir_ + " is closing");
    for (CommitOp* op : ops) {
      if (op->extent.segment != 0) segments_->Settle(op->extent);
      op->status = closing;
    }
    return closing;
  }
  for (CommitOp* op : ops) {
    op->done = false;
    op->status = Status::Ok();
    if (!op->has_data) op->extent = {};  // else WriteDataBatch placed it
    op->queued_at = std::chrono::steady_clock::now();
    queue_.push_back(op);
  }
  queue_cv_.notify_one();
  for (CommitOp* op : ops)
    op->done_cv.wait(lock.native(), [op] { return op->done; });
  lock.Unlock();
  for (CommitOp* op : ops)
    if (!op->punch_later) PunchHoles(&op->holes);
  for (const CommitOp* op : ops) {
    if (!op->status.ok()) return op->status;
  }
  return Status::Ok();
}

size_t ChunkStore::queued_commit_ops() const {
  MutexLock lock(&queue_mu_);
  return queue_.size();
}

void ChunkStore::CommitLoop() {
  UniqueMutexLock lock(&queue_mu_);
  for (;;) {
    queue_cv_.wait(lock.native(), [this] {
      queue_mu_.AssertHeld();
      return stop_ || !queue_.empty();
    });
    if (queue_.empty()) break;  // stopping, nothing left
    // Everything that arrived while the previous batch was syncing.
    std::vector<CommitOp*> batch;
    batch.swap(queue_);
    lock.Unlock();
    if (options_.before_commit_batch)
      options_.before_commit_batch(batch.size());
    const auto taken = std::chrono::steady_clock::now();
    uint64_t queued = 0;
    for (const CommitOp* op : batch) queued += NanosSince(op->queued_at);
    CommitBatch(batch);
    const uint64_t took = NanosSince(taken);
    counters_.queue_ns.fetch_add(queued, std::memory_order_relaxed);
    counters_.batch_ns.fetch_add(took, std::memory_order_relaxed);
    counters_.commit_wait_ns.fetch_add(queued + took * batch.size(),
                                       std::memory_order_relaxed);
    lock.Lock();
    // Wakes only this batch's submitters (one waiter per op). Signalled
    // under the mutex: a submitter may destroy its op as soon as it sees
    // `done`.
    for (CommitOp* op : batch) {
      op->done = true;
      op->done_cv.notify_one();
    }
  }
  committer_done_ = true;
  index_cv_.notify_all();
  lock.Unlock();
  // Close: the records of acknowledged batches need no check at open.
  if (!confirmed_pending_.empty()) {
    (void)IndexWrite([this](rocksdb::WriteBatch* b) {
      for (const std::string& k : confirmed_pending_) b->Delete(k);
    });
  }
}

void ChunkStore::IndexLoop() {
  UniqueMutexLock lock(&queue_mu_);
  for (;;) {
    index_cv_.wait(lock.native(), [this] {
      queue_mu_.AssertHeld();
      return committer_done_ || index_job_ != nullptr;
    });
    if (index_job_ == nullptr) return;
    rocksdb::WriteBatch* wb = index_job_;
    index_job_ = nullptr;
    lock.Unlock();
    Status st = WriteIndexBatch(wb);
    lock.Lock();
    index_job_status_ = st;
    index_job_done_ = true;
    index_cv_.notify_all();
  }
}

Status ChunkStore::WriteIndexBatch(rocksdb::WriteBatch* wb) {
  const auto start = std::chrono::steady_clock::now();
  Status st = RocksWriteSynced(db_.get(), wb, "chunk index of " + dir_);
  if (st.code() == ENOSPC && ReleaseIndexReserve()) {
    st = RocksWriteSynced(db_.get(), wb, "chunk index of " + dir_);
  }
  counters_.index_sync_ns.fetch_add(NanosSince(start),
                                    std::memory_order_relaxed);
  counters_.index_syncs.fetch_add(1, std::memory_order_relaxed);
  return st;
}

Status ChunkStore::PlaceData(CommitOp* op) {
  const uint64_t bytes = SegmentExtentBytes(op->data.size());
  STRIPEFS_ASSIGN_OR_RETURN(op->extent, segments_->Allocate(bytes));
  op->value.in_segment = true;
  op->value.pieces = op->kept_pieces;
  if (bytes == 0) return Status::Ok();
  const PatchRange one{0, static_cast<uint32_t>(op->data.size())};
  uint64_t in_extent = 0;
  for (const PatchRange& w : op->windows.empty()
                                 ? std::span<const PatchRange>(&one, 1)
                                 : std::span<const PatchRange>(op->windows)) {
    ChunkPiece piece;
    piece.chunk_offset = w.offset;
    piece.length = w.length;
    piece.segment = op->extent.segment;
    piece.segment_offset = op->extent.offset + in_extent;
    in_extent += w.length;
    auto at = std::lower_bound(
        op->value.pieces.begin(), op->value.pieces.end(), piece.chunk_offset,
        [](const ChunkPiece& p, uint32_t off) { return p.chunk_offset < off; });
    op->value.pieces.insert(at, piece);
  }
  return Status::Ok();
}

Status ChunkStore::DataWritten(CommitOp* op, const SegmentFile& f, Status st,
                               uint64_t write_ns) {
  counters_.data_write_ns.fetch_add(write_ns, std::memory_order_relaxed);
  counters_.data_writes.fetch_add(1, std::memory_order_relaxed);
  if (!st.ok()) {
    segments_->Settle(op->extent);
    op->extent = {};
    return st.Annotate("writing segment " + f.path);
  }
  counters_.bytes_written.fetch_add(op->extent.bytes,
                                    std::memory_order_relaxed);
  return Status::Ok();
}

int ChunkStore::PickWriteFd(const CommitOp& op, const SegmentFile& f) {
  if (!f.direct || op.extent.bytes > options_.buffered_write_max_bytes) {
    return f.write_fd.get();
  }
  counters_.buffered_writes.fetch_add(1, std::memory_order_relaxed);
  return f.buffered_fd.get();
}

Status ChunkStore::WriteData(CommitOp* op) {
  STRIPEFS_RETURN_IF_ERROR(PlaceData(op));
  if (op->extent.bytes == 0) return Status::Ok();
  std::shared_ptr<SegmentFile> f = segments_->Get(op->extent.segment);
  AlignedBuf oversize;
  const auto start = std::chrono::steady_clock::now();
  const uint8_t* buf = Stage(op->data, op->extent.bytes, &oversize);
  Status st = io_->Write(PickWriteFd(*op, *f), buf, op->extent.bytes,
                         op->extent.offset);
  return DataWritten(op, *f, st, NanosSince(start));
}

void ChunkStore::WriteDataBatch(const std::vector<CommitOp*>& ops) {
  struct Placed {
    CommitOp* op;
    std::shared_ptr<SegmentFile> f;
    AlignedBuf own;  // the staged copy, when the op's bytes need one
  };
  std::vector<Placed> placed;
  std::vector<UringFileIo::BatchIo> ios;
  const auto start = std::chrono::steady_clock::now();
  for (CommitOp* op : ops) {
    op->status = Status::Ok();
    op->extent = {};
    if (!op->has_data) continue;
    op->status = PlaceData(op);
    if (!op->status.ok() || op->extent.bytes == 0) continue;
    Placed p{op, segments_->Get(op->extent.segment), nullptr};
    // Each op its own staging buffer (Stage's per-thread one is reused).
    const uint8_t* buf = Stage(op->data, op->extent.bytes, &p.own, true);
    UringFileIo::BatchIo io;
    io.fd = PickWriteFd(*op, *p.f);
    io.buf = const_cast<uint8_t*>(buf);  // only read: a write
    io.len = op->extent.bytes;
    io.offset = op->extent.offset;
    io.write = true;
    ios.push_back(std::move(io));
    placed.push_back(std::move(p));
  }
  io_->RunBatch(ios);
  // The batch's time, shared out over its writes.
  const uint64_t each = placed.empty() ? 0 : NanosSince(start) / placed.size();
  for (size_t i = 0; i < placed.size(); ++i) {
    CommitOp* op = placed[i].op;
    op->status =
        DataWritten(op, *placed[i].f,
                    ios[i].got.ok() ? Status::Ok() : ios[i].got.status(), each);
  }
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
    const auto start = std::chrono::steady_clock::now();
    Status st = io_->DataSync(f->write_fd.get());
    counters_.data_sync_ns.fetch_add(NanosSince(start),
                                     std::memory_order_relaxed);
    counters_.data_syncs.fetch_add(1, std::memory_order_relaxed);
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
  // Each put's value as written (the version cache decodes it).
  std::vector<std::string> encoded(batch.size());
  std::string pending_key;
  const bool has_data = FillIndexBatch(batch, &wb, &encoded, &pending_key);
  // Records of acknowledged batches go in the same WriteBatch: every op of
  // this batch came after them (an op holds its chunk lock until it is
  // acknowledged), so none of their entries can change before they go.
  const size_t confirmed = confirmed_pending_.size();
  for (const std::string& k : confirmed_pending_) wb.Delete(k);

  const Status st = SyncRound(batch, &wb, has_data);
  FinishBatch(batch, st, confirmed, pending_key, encoded);
}

bool ChunkStore::FillIndexBatch(const std::vector<CommitOp*>& batch,
                                rocksdb::WriteBatch* wb,
                                std::vector<std::string>* encoded,
                                std::string* pending_key) {
  std::vector<PendingEntry> pending;
  bool has_data = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    CommitOp* op = batch[i];
    if (op->kind == CommitOp::Kind::kPut) {
      (*encoded)[i] = EncodeChunkValue(op->value);
      for (const auto& k : op->keys) wb->Put(k, (*encoded)[i]);
    } else {
      for (const auto& k : op->keys) wb->Delete(k);
    }
    if (op->extent.bytes == 0) continue;
    // New bytes: the entries go down with the data sync, not after it, so
    // they are named in the batch's pending record.
    has_data = true;
    // Every piece in the new extent (a patch may have several).
    for (const ChunkPiece& piece : op->value.pieces) {
      if (piece.segment != op->extent.segment ||
          piece.segment_offset < op->extent.offset ||
          piece.segment_offset >= op->extent.offset + op->extent.bytes) {
        continue;
      }
      for (const auto& k : op->keys) {
        PendingEntry e;
        if (!DecodeChunkKey(k, &e.id, &e.version).ok()) continue;
        e.piece = piece;
        for (const Freed& f : op->freed) {
          if (f.version == e.version) {
            e.has_old = true;
            e.old = f.value;
          }
        }
        pending.push_back(std::move(e));
      }
    }
  }
  if (!pending.empty()) {
    *pending_key = EncodePendingKey(next_pending_++);
    wb->Put(*pending_key, EncodePendingRecord(pending));
  }
  return has_data;
}

Status ChunkStore::SyncRound(const std::vector<CommitOp*>& batch,
                             rocksdb::WriteBatch* wb, bool has_data) {
  Status st;
  if (!has_data) {
    st = WriteIndexBatch(wb);
  } else {
    // One sync round: the index thread writes the entries (synced) while
    // this thread fdatasyncs the segments; both must be durable before the
    // batch is acknowledged.
    {
      MutexLock lock(&queue_mu_);
      index_job_ = wb;
      index_job_done_ = false;
    }
    index_cv_.notify_all();
    SyncBatchData(batch);
    UniqueMutexLock lock(&queue_mu_);
    index_cv_.wait(lock.native(), [this] {
      queue_mu_.AssertHeld();
      return index_job_done_;
    });
    st = index_job_status_;
  }
  return st;
}

void ChunkStore::FinishBatch(const std::vector<CommitOp*>& batch,
                             const Status& st, size_t confirmed,
                             const std::string& pending_key,
                             const std::vector<std::string>& encoded) {
  std::vector<const CommitOp*> data_failed;
  for (CommitOp* op : batch) {
    if (!op->status.ok() && st.ok()) data_failed.push_back(op);
    if (op->status.ok()) op->status = st;
  }
  bool record_done = st.ok();
  if (st.ok() && !data_failed.empty()) {
    // Entries were written for bytes that did not sync: take them back
    // (else the pending record stays and the next open checks them).
    record_done = RollBack(data_failed).ok();
  }
  if (st.ok()) {
    confirmed_pending_.erase(confirmed_pending_.begin(),
                             confirmed_pending_.begin() + confirmed);
  }
  if (record_done && !pending_key.empty()) {
    confirmed_pending_.push_back(pending_key);
  }
  UpdateVersionCache(batch, encoded);
  for (size_t i = 0; i < batch.size(); ++i) {
    CommitOp& op = *batch[i];
    if (!op.status.ok()) continue;
    ApplyLive(op);
  }
  for (const CommitOp* op : batch) {
    if (op->extent.segment != 0) segments_->Settle(op->extent);
  }
  bool freed = false;
  for (const CommitOp* op : batch) {
    freed |= op->status.ok() && op->kind == CommitOp::Kind::kDelete;
  }
  if (!reserve_held_ && freed) RestoreIndexReserve();
  counters_.commit_batches.fetch_add(1, std::memory_order_relaxed);
  counters_.committed_ops.fetch_add(batch.size(), std::memory_order_relaxed);
}

void ChunkStore::UpdateVersionCache(const std::vector<CommitOp*>& batch,
                                    const std::vector<std::string>& encoded) {
  if (!version_cache_) return;
  std::vector<uint64_t> versions;
  for (size_t i = 0; i < batch.size(); ++i) {
    const CommitOp& op = *batch[i];
    // Not committed, or committed and rolled back (or not): the index
    // decides, at the next scan.
    bool known = op.status.ok();
    versions.clear();
    for (const auto& k : op.keys) {
      ChunkId id;
      uint64_t version = 0;
      if (!DecodeChunkKey(k, &id, &version).ok()) {
        version_cache_->Clear();  // cannot happen: ops name chunk keys
      } else if (id != op.id) {
        version_cache_->Drop(id);  // nor this
        known = false;
      }
      versions.push_back(version);
    }
    if (!known) {
      version_cache_->Drop(op.id);
    } else if (op.kind == CommitOp::Kind::kPut) {
      version_cache_->ApplyPut(op.id, versions, encoded[i]);
    } else {
      version_cache_->ApplyDelete(op.id, versions);
    }
  }
}

Status ChunkStore::RollBack(const std::vector<const CommitOp*>& failed) {
  return IndexWrite([&](rocksdb::WriteBatch* b) {
    for (const CommitOp* op : failed) {
      for (const auto& k : op->keys) {
        ChunkId id;
        uint64_t version = 0;
        bool restored = false;
        if (DecodeChunkKey(k, &id, &version).ok()) {
          for (const Freed& f : op->freed) {
            if (f.version != version) continue;
            b->Put(k, EncodeChunkValue(f.value));
            restored = true;
          }
        }
        if (!restored) b->Delete(k);
      }
    }
  });
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

}  // namespace stripefs
