// The chunk store's public calls (see chunk_store.h): each takes its chunk
// locks and runs a short sequence of the parts named there.
#include "backend/chunk/chunk_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>

#include "backend/chunk/chunk_index.h"
#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"
#include "common/coding.h"
#include "common/rocks_glue.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {

using chunk_paths::Log;

ChunkStore::ChunkStore(std::string dir, const ChunkStoreOptions& options)
    : dir_(std::move(dir)),
      data_dir_(dir_ + "/" + chunk_paths::kDataName),
      tmp_dir_(dir_ + "/" + chunk_paths::kTmpName),
      options_(options) {
  if (options.version_cache_bytes > 0) {
    version_cache_ =
        std::make_unique<ChunkVersionCache>(options.version_cache_bytes);
  }
}

ChunkStore::~ChunkStore() {
  {
    MutexLock lock(&queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  stop_cv_.notify_all();  // the compactor sleeps on it between passes
  if (compactor_.joinable()) compactor_.join();
  if (committer_.joinable()) committer_.join();
  if (indexer_.joinable()) indexer_.join();
  if (db_) {
    (void)db_->Close();
    db_.reset();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

bool ChunkStore::using_io_uring() const { return io_->using_io_uring(); }

std::shared_mutex& ChunkStore::LockFor(const ChunkId& id) {
  return chunk_locks_[ChunkIdHash()(id) % kLockStripes];
}

Status ChunkStore::NoSpaceStatus(const std::string& what) {
  counters_.nospace_refusals.fetch_add(1, std::memory_order_relaxed);
  struct statvfs vfs;
  std::string avail = "unknown";
  if (::statvfs(dir_.c_str(), &vfs) == 0) {
    avail = std::to_string(static_cast<uint64_t>(vfs.f_bavail) *
                           static_cast<uint64_t>(vfs.f_frsize));
  }
  return Status::NoSpace(
      "chunk store " + dir_ + " is full (" + avail + " bytes available, " +
      std::to_string(reserve_bytes_) + " reserved) while " + what +
      "; free space on that file system, add capacity, or mark this chunk "
      "server out so repair places its chunks elsewhere");
}

Status ChunkStore::CheckSpace(size_t len) {
  if (reserve_bytes_ == 0) return Status::Ok();  // real ENOSPC only
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) {
    return Status::FromErrno(errno, "statvfs " + dir_);
  }
  uint64_t avail =
      static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  if (avail < reserve_bytes_ || avail - reserve_bytes_ < len) {
    return NoSpaceStatus("writing a chunk of " + std::to_string(len) +
                         " bytes");
  }
  return Status::Ok();
}

void ChunkStore::InitWriteOp(const ChunkId& id, uint64_t version,
                             std::span<const uint8_t> data, CommitOp* op) {
  op->id = id;
  op->keys = {EncodeChunkKey(id, version)};
  op->has_data = true;
  op->data = data;
  op->value.length = static_cast<uint32_t>(data.size());
  op->value.block_shift = kChunkCrcBlockShift;
  op->value.block_crcs = ComputeBlockCrcs(
      data.data(), data.size(), kChunkCrcBlockShift, &op->value.crc32c);
  op->value.in_segment = true;
}

Status ChunkStore::WriteChunk(const ChunkId& id, uint64_t version,
                              std::span<const uint8_t> data) {
  const std::string name = DescribeChunk(id, version);
  if (version == 0) {
    return Status::InvalidArgument("cannot write " + name +
                                   ": version 0 is not a valid chunk version");
  }
  if (data.size() > options_.max_chunk_bytes) {
    return Status::InvalidArgument(
        "cannot write " + name + ": " + std::to_string(data.size()) +
        " bytes exceed the store's max_chunk_bytes of " +
        std::to_string(options_.max_chunk_bytes));
  }
  // A full disk first gives back what compaction can free (before the chunk
  // lock: compaction takes chunk locks).
  if (Status sp = CheckSpace(data.size()); !sp.ok()) {
    auto rep = Compact(true);
    if (!rep.ok() || rep->segments_compacted == 0) return sp;
    STRIPEFS_RETURN_IF_ERROR(CheckSpace(data.size()));
  }
  CommitOp op;
  InitWriteOp(id, version, data, &op);

  for (int attempt = 0;; ++attempt) {
    std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
    bool existed = false;
    ChunkIndexValue old;
    Status gs = GetEntry(id, version, &existed, &old);
    // A malformed entry is simply replaced (and stays uncounted until the
    // next recount).
    if (!gs.ok() && gs.code() != EBADMSG) return gs;
    if (existed && old.length != data.size()) {
      return Status::Exists(
          "cannot write " + name + ": it is already stored with " +
          std::to_string(old.length) + " bytes, this write has " +
          std::to_string(data.size()) +
          "; chunk versions are immutable (a rewrite must have the same "
          "length)");
    }
    op.freed.clear();
    if (existed) op.freed.push_back({version, old});
    op.others.clear();
    std::vector<std::pair<uint64_t, ChunkIndexValue>> all;
    STRIPEFS_RETURN_IF_ERROR(GatherVersions(id, &all));
    for (auto& [ver, val] : all) {
      if (ver != version) op.others.push_back(std::move(val));
    }
    Status st = Submit(&op);
    if (st.ok()) {
      if (!existed) {
        chunks_.fetch_add(1, std::memory_order_relaxed);
        bytes_.fetch_add(data.size(), std::memory_order_relaxed);
      }
      writes_.fetch_add(1, std::memory_order_relaxed);
      return Status::Ok();
    }
    if (st.code() != ENOSPC) return st.Annotate("storing " + name);
    if (attempt > 0) {
      return NoSpaceStatus("storing " + name + " (" + st.message() + ")");
    }
    chunk_lock.unlock();
    (void)Compact(true);
  }
}

void ChunkStore::NoteMissing(const ChunkId& id, uint64_t version) {
  counters_.missing_chunks.fetch_add(1, std::memory_order_relaxed);
  Log(dir_, "%s is indexed but its data is missing; entry dropped",
      DescribeChunk(id, version).c_str());
}

Status ChunkStore::DropEntry(const ChunkId& id, uint64_t version) {
  bool found = false;
  ChunkIndexValue v;
  Status gs = GetEntry(id, version, &found, &v);
  if (!found && gs.ok()) return Status::Ok();
  const std::string key = EncodeChunkKey(id, version);
  STRIPEFS_RETURN_IF_ERROR(
      IndexWrite([&](rocksdb::WriteBatch* b) { b->Delete(key); }));
  if (found) {
    chunks_.fetch_sub(1, std::memory_order_relaxed);
    bytes_.fetch_sub(v.length, std::memory_order_relaxed);
    CommitOp op;
    op.kind = CommitOp::Kind::kDelete;
    op.id = id;
    op.keys = {key};
    op.freed.push_back({version, v});
    std::vector<std::pair<uint64_t, ChunkIndexValue>> all;
    if (GatherVersions(id, &all).ok()) {
      for (auto& [ver, val] : all) op.others.push_back(std::move(val));
    }
    ApplyLive(op);
    PunchHoles(&op.holes);
  }
  return Status::Ok();
}

Status ChunkStore::DeleteChunk(const ChunkId& id, uint64_t keep_version) {
  return DeleteMatching(
      id, [keep_version](uint64_t v) { return v != keep_version; });
}

Status ChunkStore::DeleteChunkVersion(const ChunkId& id, uint64_t version) {
  return DeleteMatching(id, [version](uint64_t v) { return v == version; });
}

Status ChunkStore::PrepareDelete(const ChunkId& id,
                                 const std::function<bool(uint64_t)>& doomed,
                                 CommitOp* op, uint64_t* counted,
                                 uint64_t* counted_bytes) {
  op->kind = CommitOp::Kind::kDelete;
  op->id = id;
  std::vector<std::pair<uint64_t, ChunkIndexValue>> all;
  std::vector<uint64_t> bad;
  STRIPEFS_RETURN_IF_ERROR(GatherVersions(id, &all, &bad));
  for (auto& [ver, val] : all) {
    if (!doomed(ver)) {
      op->others.push_back(std::move(val));
      continue;
    }
    op->keys.push_back(EncodeChunkKey(id, ver));
    ++*counted;
    *counted_bytes += val.length;
    op->freed.push_back({ver, std::move(val)});
  }
  // Malformed: uncounted, just removed.
  for (uint64_t ver : bad) {
    if (doomed(ver)) op->keys.push_back(EncodeChunkKey(id, ver));
  }
  // Legacy files first, then the index entries: this frees space before the
  // index is written, so deleting works on a full disk. A crash in between
  // leaves entries without files; Sweep drops them (they were being deleted
  // anyway).
  for (const Freed& f : op->freed) {
    if (f.value.in_segment) continue;
    const std::string path =
        chunk_paths::LegacyChunkPath(data_dir_, id, f.version);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      Log(dir_, "cannot remove %s: %s (Sweep will retry)", path.c_str(),
          std::strerror(errno));
    }
  }
  return Status::Ok();
}

Status ChunkStore::DeleteMatching(const ChunkId& id,
                                  const std::function<bool(uint64_t)>& doomed) {
  std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
  CommitOp op;
  uint64_t counted = 0, counted_bytes = 0;
  STRIPEFS_RETURN_IF_ERROR(
      PrepareDelete(id, doomed, &op, &counted, &counted_bytes));
  if (op.keys.empty()) return Status::Ok();
  // Space back after the chunk lock goes: a write of this chunk need not
  // wait for the hole punching.
  op.punch_later = true;
  Status st = Submit(&op);
  chunk_lock.unlock();
  PunchHoles(&op.holes);
  if (!st.ok()) {
    return st.Annotate("deleting " + std::to_string(op.keys.size()) +
                       " versions of " + DescribeChunk(id, 0) +
                       ": legacy files removed, index entries left (reads "
                       "report them missing; Sweep drops them)");
  }
  chunks_.fetch_sub(counted, std::memory_order_relaxed);
  bytes_.fetch_sub(counted_bytes, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::DeleteChunkVersions(std::span<const ChunkVersion> chunks) {
  // The versions per chunk, and the distinct lock stripes, locked in address
  // order (every other path holds one chunk lock at a time).
  std::map<ChunkId, std::vector<uint64_t>> by_id;
  for (const ChunkVersion& c : chunks) by_id[c.id].push_back(c.version);
  std::vector<ChunkId> ids;
  for (const auto& [id, versions] : by_id) ids.push_back(id);
  auto locks = LockInOrder<std::unique_lock<std::shared_mutex>>(ids);

  std::vector<CommitOp> ops(by_id.size());
  std::vector<CommitOp*> queued;
  uint64_t counted = 0, counted_bytes = 0;
  size_t i = 0;
  for (const auto& entry : by_id) {
    // Named, not a structured binding: clang 14 cannot capture those.
    const auto& versions = entry.second;
    CommitOp& op = ops[i++];
    STRIPEFS_RETURN_IF_ERROR(PrepareDelete(
        entry.first,
        [&versions](uint64_t v) {
          return std::find(versions.begin(), versions.end(), v) !=
                 versions.end();
        },
        &op, &counted, &counted_bytes));
    if (!op.keys.empty()) {
      op.punch_later = true;
      queued.push_back(&op);
    }
  }
  if (queued.empty()) return Status::Ok();
  Status st = SubmitAll(queued);
  // Space back after the chunk locks go: writes of these chunks (the next
  // versions of the same stripes) need not wait for the hole punching.
  locks.clear();
  for (CommitOp* op : queued) PunchHoles(&op->holes);
  if (!st.ok()) {
    return st.Annotate("deleting " + std::to_string(chunks.size()) +
                       " chunk versions in " + dir_ +
                       ": legacy files removed, index entries left (reads "
                       "report them missing; Sweep drops them)");
  }
  chunks_.fetch_sub(counted, std::memory_order_relaxed);
  bytes_.fetch_sub(counted_bytes, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::CloneChunk(const ChunkId& id, uint64_t from_version,
                              uint64_t to_version, uint32_t length) {
  const std::string from_name = DescribeChunk(id, from_version);
  const std::string to_name = DescribeChunk(id, to_version);
  if (to_version == 0 || to_version == from_version) {
    return Status::InvalidArgument("cannot clone " + from_name +
                                   " to version " + std::to_string(to_version) +
                                   ": needs a different, non-zero version");
  }
  {
    std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
    CommitOp op;
    bool existed = false;
    Prep prep = Prep::kReady;
    STRIPEFS_RETURN_IF_ERROR(PrepareClone(id, from_version, to_version, length,
                                          &op, &existed, &prep));
    if (prep == Prep::kReady) {
      STRIPEFS_RETURN_IF_ERROR(Submit(&op).Annotate("cloning to " + to_name));
      CountStored(ChunkWriteOp::Kind::kClone, length, existed);
      return Status::Ok();
    }
  }
  // A prefix, or a legacy source file: copy.
  return ChunkService::CloneChunk(id, from_version, to_version, length);
}

Status ChunkStore::PatchChunk(const ChunkId& id, uint64_t from_version,
                              uint64_t to_version, uint32_t length,
                              uint32_t offset, std::span<const uint8_t> bytes) {
  if (uint64_t{offset} + bytes.size() > length) {
    return Status::InvalidArgument(
        "patch of [" + std::to_string(offset) + ", " +
        std::to_string(uint64_t{offset} + bytes.size()) +
        ") is past the chunk's " + std::to_string(length) + " bytes");
  }
  const PatchRange one{offset, static_cast<uint32_t>(bytes.size())};
  return PatchOne(id, from_version, to_version, length,
                  bytes.empty() ? std::span<const PatchRange>()
                                : std::span<const PatchRange>(&one, 1),
                  bytes);
}

Status ChunkStore::PatchChunkRanges(const ChunkId& id, uint64_t from_version,
                                    uint64_t to_version, uint32_t length,
                                    std::span<const PatchRange> ranges,
                                    std::span<const uint8_t> bytes) {
  STRIPEFS_RETURN_IF_ERROR(CheckPatchRanges(ranges, length, bytes.size()));
  return PatchOne(id, from_version, to_version, length, ranges, bytes);
}

Status ChunkStore::PatchOne(const ChunkId& id, uint64_t from_version,
                            uint64_t to_version, uint32_t length,
                            std::span<const PatchRange> ranges,
                            std::span<const uint8_t> bytes) {
  // For messages only: no string is built on the success path.
  auto to_name = [&] { return DescribeChunk(id, to_version); };
  if (to_version == 0) {
    return Status::InvalidArgument("cannot patch " +
                                   DescribeChunk(id, from_version) +
                                   " to version 0 (not a valid version)");
  }
  // Read it all, write it all (one piece). ChunkService's one-range
  // default calls PatchChunk, so it is called here by name.
  auto whole = [&] {
    if (ranges.size() <= 1) {
      return ChunkService::PatchChunk(id, from_version, to_version, length,
                                      ranges.empty() ? 0 : ranges[0].offset,
                                      bytes);
    }
    return ChunkService::PatchChunkRanges(id, from_version, to_version, length,
                                          ranges, bytes);
  };
  if (to_version == from_version) return whole();
  if (bytes.empty()) return CloneChunk(id, from_version, to_version, length);
  for (int attempt = 0;; ++attempt) {
    std::unique_lock<std::shared_mutex> chunk_lock(LockFor(id));
    CommitOp op;
    AlignedBytes data;
    bool existed = false;
    Prep prep = Prep::kReady;
    Status ps = PreparePatch(id, from_version, to_version, length, ranges,
                             bytes, &op, &data, &existed, &prep);
    if (prep == Prep::kDefault) {
      chunk_lock.unlock();
      counters_.patches_whole.fetch_add(1, std::memory_order_relaxed);
      return whole();
    }
    if (prep == Prep::kNoSpace) {
      if (attempt > 0) return ps;
      chunk_lock.unlock();
      auto rep = Compact(true);
      if (!rep.ok() || rep->segments_compacted == 0) return ps;
      continue;
    }
    STRIPEFS_RETURN_IF_ERROR(ps);
    Status st = Submit(&op);
    if (st.ok()) {
      CountStored(ChunkWriteOp::Kind::kPatch, length, existed);
      return Status::Ok();
    }
    if (st.code() != ENOSPC) return st.Annotate("patching " + to_name());
    if (attempt > 0) {
      return NoSpaceStatus("patching " + to_name() + " (" + st.message() + ")");
    }
    chunk_lock.unlock();
    (void)Compact(true);
  }
}

void ChunkStore::CountStored(ChunkWriteOp::Kind kind, uint64_t length,
                             bool existed) {
  if (!existed) {
    chunks_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(length, std::memory_order_relaxed);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  if (kind == ChunkWriteOp::Kind::kClone) {
    counters_.clones_shared.fetch_add(1, std::memory_order_relaxed);
  } else if (kind == ChunkWriteOp::Kind::kPatch) {
    counters_.patches_in_place.fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<Status> ChunkStore::ApplyChunkOps(
    std::span<const ChunkWriteOp> ops) {
  if (ops.size() <= 1) return ChunkService::ApplyChunkOps(ops);
  std::vector<Status> out(ops.size());
  // Ops of a chunk id named twice take the one-op path (their versions'
  // live-byte accounting assumes one op per chunk and batch).
  std::map<ChunkId, size_t> per_id;
  for (const ChunkWriteOp& w : ops) ++per_id[w.id];
  std::vector<size_t> one_by_one;
  std::vector<ChunkId> batched_ids;
  for (const auto& [id, n] : per_id) {
    if (n == 1) batched_ids.push_back(id);
  }
  std::vector<BatchOp> batch(ops.size());
  std::vector<CommitOp*> queued;
  {
    // Every chunk lock, exclusively and in address order, until the batch
    // is committed (as DeleteChunkVersions).
    auto locks = LockInOrder<std::unique_lock<std::shared_mutex>>(batched_ids);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (per_id[ops[i].id] != 1) {
        one_by_one.push_back(i);
        continue;
      }
      Prep prep = Prep::kReady;
      Status st = PrepareBatchOp(ops[i], &batch[i], &prep);
      if (prep != Prep::kReady) {
        one_by_one.push_back(i);
      } else if (!st.ok()) {
        out[i] = st;
      } else {
        batch[i].op.punch_later = true;
        queued.push_back(&batch[i].op);
      }
    }
    // The bytes of all, then one queueing and one wait for all.
    WriteDataBatch(queued);
    std::vector<CommitOp*> written;
    for (CommitOp* op : queued) {
      if (op->status.ok()) written.push_back(op);
    }
    (void)SubmitAll(written);
    counters_.batched_ops.fetch_add(written.size(), std::memory_order_relaxed);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    BatchOp& b = batch[i];
    PunchHoles(&b.op.holes);
    if (b.op.keys.empty() || !out[i].ok()) continue;
    if (std::find(one_by_one.begin(), one_by_one.end(), i) != one_by_one.end())
      continue;
    if (b.op.status.ok()) {
      // A whole patch counts as the one-op path counts it: a write.
      CountStored(b.whole ? ChunkWriteOp::Kind::kWrite : ops[i].kind,
                  ops[i].kind == ChunkWriteOp::Kind::kWrite
                      ? ops[i].bytes.size()
                      : ops[i].length,
                  b.existed);
    } else if (b.op.status.code() == ENOSPC) {
      one_by_one.push_back(i);  // the one-op path compacts and retries
    } else {
      out[i] = b.op.status.Annotate(
          "storing " + DescribeChunk(ops[i].id, ops[i].to_version));
    }
  }
  if (!one_by_one.empty()) {
    std::sort(one_by_one.begin(), one_by_one.end());
    std::vector<ChunkWriteOp> rest;
    for (size_t i : one_by_one) rest.push_back(ops[i]);
    const std::vector<Status> got = ChunkService::ApplyChunkOps(rest);
    for (size_t j = 0; j < one_by_one.size(); ++j) out[one_by_one[j]] = got[j];
  }
  return out;
}

Result<ChunkStoreStats> ChunkStore::Stats() {
  ChunkStoreStats s;
  s.chunks = chunks_.load();
  s.bytes_stored = bytes_.load();
  s.crc_errors = crc_errors_.load();
  s.writes = writes_.load();
  s.reads = reads_.load();
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0) {
    return Status::FromErrno(errno, "statvfs " + dir_);
  }
  const uint64_t frsize = vfs.f_frsize;
  s.bytes_free = static_cast<uint64_t>(vfs.f_bavail) * frsize;
  s.bytes_capacity = static_cast<uint64_t>(vfs.f_blocks) * frsize;
  s.bytes_reserved = reserve_bytes_;
  s.fs_id = static_cast<uint64_t>(vfs.f_fsid);
  return s;
}

ChunkStoreCounters ChunkStore::Counters() const {
  ChunkStoreCounters c;
  counters_.SnapshotInto(&c);
  c.segments_removed = segments_ ? segments_->removed() : 0;
  c.segments_from_spares = segments_ ? segments_->rolled_onto_spares() : 0;
  c.spares_filled = segments_ ? segments_->spares_filled() : 0;
  c.data_submissions = io_ ? io_->submissions() : 0;
  if (version_cache_) {
    const ChunkVersionCacheCounters vc = version_cache_->Counters();
    c.version_cache_hits = vc.hits;
    c.version_cache_misses = vc.misses;
    c.version_cache_evictions = vc.evictions;
    c.version_cache_bytes = vc.bytes;
    c.version_cache_entries = vc.entries;
  }
  return c;
}

std::vector<SegmentInfo> ChunkStore::Segments() { return segments_->List(); }

}  // namespace stripefs
