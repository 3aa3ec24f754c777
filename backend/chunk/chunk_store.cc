#include "backend/chunk/chunk_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <sys/file.h>
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

#include "backend/chunk/chunk_commit_op.h"
#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"
#include "common/coding.h"
#include "common/rocks_glue.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {

using chunk_paths::Log;

namespace {

std::string RocksMessage(const rocksdb::Status& s) { return s.ToString(); }

// An index iterator over the keys that start with `prefix`, positioned at
// the first. Its upper bound stops it at the prefix's end: without one, a
// Seek past the last live key of a prefix walks every tombstone after it
// (deleted versions, the deleted 'p' record of every earlier batch), which
// each write of a new chunk id did, one by one.
class PrefixScan {
 public:
  // `cache_only`: from memory (memtable, block cache) only; the iterator's
  // status is Incomplete where that would need disk I/O.
  PrefixScan(rocksdb::DB* db, std::string_view prefix, bool cache_only = false)
      : end_(coding::PrefixEnd(prefix)), upper_(end_) {
    rocksdb::ReadOptions ro;
    if (!end_.empty()) ro.iterate_upper_bound = &upper_;
    if (cache_only) ro.read_tier = rocksdb::kBlockCacheTier;
    it_.reset(db->NewIterator(ro));
    it_->Seek(rocksdb::Slice(prefix.data(), prefix.size()));
  }
  PrefixScan(const PrefixScan&) = delete;  // upper_ points into end_
  PrefixScan& operator=(const PrefixScan&) = delete;
  rocksdb::Iterator* operator->() const { return it_.get(); }

 private:
  const std::string end_;
  const rocksdb::Slice upper_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

// The chunk ids whose keys a WriteBatch puts or deletes; `unknown` when it
// holds anything else that could touch chunk keys (a range delete, a chunk
// key that does not decode). Other operations fail the iteration.
class TouchedChunkIds : public rocksdb::WriteBatch::Handler {
 public:
  rocksdb::Status PutCF(uint32_t, const rocksdb::Slice& key,
                        const rocksdb::Slice&) override {
    return Note(key);
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice& key) override {
    return Note(key);
  }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice& key) override {
    return Note(key);
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice& key,
                          const rocksdb::Slice&) override {
    return Note(key);
  }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&,
                                const rocksdb::Slice&) override {
    unknown = true;
    return rocksdb::Status::OK();
  }

  std::vector<ChunkId> ids;
  bool unknown = false;

 private:
  rocksdb::Status Note(const rocksdb::Slice& key) {
    if (key.size() == 0 || key[0] != kChunkKeyPrefix) {
      return rocksdb::Status::OK();
    }
    ChunkId id;
    uint64_t version = 0;
    if (DecodeChunkKey(std::string_view(key.data(), key.size()), &id, &version)
            .ok()) {
      ids.push_back(id);
    } else {
      unknown = true;
    }
    return rocksdb::Status::OK();
  }
};

// mkdir -p.
Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') {
      std::string part = dir.substr(0, pos);
      if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::FromErrno(errno,
                                 "cannot create chunk store directory " + part);
      }
    }
  }
  return Status::Ok();
}

// Writes the marker durably (tmp file, fsync, rename, fsync dir).
Status WriteMarker(const std::string& dir) {
  const std::string marker = dir + "/" + chunk_paths::kMarkerName;
  const std::string tmp = marker + ".tmp";
  UniqueFd mfd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const size_t len = sizeof(chunk_paths::kMarkerSegments) - 1;
  if (!mfd.valid() ||
      ::write(mfd.get(), chunk_paths::kMarkerSegments, len) !=
          static_cast<ssize_t>(len) ||
      ::fsync(mfd.get()) != 0 || ::rename(tmp.c_str(), marker.c_str()) != 0) {
    return Status::FromErrno(errno, "cannot write marker " + marker);
  }
  return chunk_paths::FsyncDir(dir);
}

// Reads the marker: *legacy true for a one-file-per-version store.
Status CheckMarker(const std::string& dir, bool* legacy) {
  const std::string marker = dir + "/" + chunk_paths::kMarkerName;
  UniqueFd mfd(::open(marker.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[64] = {};
  ssize_t n = mfd.valid() ? ::read(mfd.get(), buf, sizeof(buf) - 1) : -1;
  const std::string_view got(buf, n > 0 ? static_cast<size_t>(n) : 0);
  if (n >= 0 && got == chunk_paths::kMarkerSegments) return Status::Ok();
  if (n >= 0 && got == chunk_paths::kMarkerLegacy) {
    *legacy = true;
    return Status::Ok();
  }
  return Status::Corruption("chunk store marker " + marker +
                            " is unreadable or of an unknown format; this "
                            "build reads 'stripefs chunk store 1' and '2'");
}

// Refuses a non-empty directory that is not (or not yet) a chunk store.
Status CheckForeign(const std::string& dir) {
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                            chunk_paths::ListDir(dir));
  for (const auto& n : names) {
    if (n != chunk_paths::kLockName && n != chunk_paths::kIndexName &&
        n != chunk_paths::kSegmentsName && n != chunk_paths::kDataName &&
        n != chunk_paths::kTmpName && n != chunk_paths::kIndexReserveName &&
        n != std::string(chunk_paths::kMarkerName) + ".tmp") {
      return Status(ENOTEMPTY,
                    "directory " + dir +
                        " is not empty and is not a chunk store (found '" + n +
                        "'); pass an empty or new directory");
    }
  }
  return Status::Ok();
}

// Takes the store's flock (one ChunkStore per directory; flock is per open
// file, so a second Open in the same process is refused too).
Result<int> TakeLock(const std::string& dir) {
  const std::string lock_path = dir + "/" + chunk_paths::kLockName;
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return Status::FromErrno(errno, "cannot create lock file " + lock_path);
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      ssize_t n = ::pread(fd.get(), buf, sizeof(buf) - 1, 0);
      std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n))
                                 : std::string("unknown");
      while (!holder.empty() && holder.back() == '\n') holder.pop_back();
      return Status(EBUSY, "chunk store " + dir + " is already open (lock " +
                               lock_path + " held by pid " + holder +
                               "); stop that chunkd or use another directory");
    }
    return Status::FromErrno(err, "flock " + lock_path);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) !=
          static_cast<ssize_t>(pid.size())) {
    return Status::FromErrno(errno, "cannot write lock file " + lock_path);
  }
  return fd.Release();
}

}  // namespace

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
    std::lock_guard<std::mutex> lock(queue_mu_);
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

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(
    const std::string& dir_in, const ChunkStoreOptions& options) {
  if (dir_in.empty()) {
    return Status::InvalidArgument("chunk store directory is empty");
  }
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();

  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno(errno, "stat " + dir);
    if (!options.create_if_missing) {
      return Status::NotFound("chunk store directory " + dir +
                              " does not exist; check the path");
    }
    STRIPEFS_RETURN_IF_ERROR(MakeDirs(dir));
    if (::stat(dir.c_str(), &st) != 0) {
      return Status::FromErrno(errno, "stat " + dir);
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(ENOTDIR, "chunk store path " + dir +
                               " exists but is not a directory; pass a "
                               "directory (it is created when missing)");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    return Status(err == EROFS ? EROFS : EACCES,
                  "chunk store directory " + dir + " is not writable (" +
                      std::strerror(err) +
                      "); fix its permissions or pick another directory");
  }

  const std::string marker = dir + "/" + chunk_paths::kMarkerName;
  const bool has_marker = ::access(marker.c_str(), F_OK) == 0;
  bool legacy = false;
  if (has_marker) {
    STRIPEFS_RETURN_IF_ERROR(CheckMarker(dir, &legacy));
    // The index is the truth: opening a store whose index is gone would make
    // every chunk garbage, and the sweep would delete it all.
    std::string current = dir + "/" + chunk_paths::kIndexName + "/CURRENT";
    if (::access(current.c_str(), F_OK) != 0) {
      return Status::Corruption(
          "chunk store " + dir + " has lost its index (" + current +
          " is missing); refusing to open, since every chunk would count as "
          "garbage. Restore " +
          dir + "/" + chunk_paths::kIndexName + ", or move " + dir +
          " away and let repair rebuild this server");
    }
  } else {
    STRIPEFS_RETURN_IF_ERROR(CheckForeign(dir));
    if (!options.create_if_missing) {
      return Status::NotFound(dir + " is not a chunk store (no " +
                              chunk_paths::kMarkerName +
                              " marker); check the path");
    }
  }

  std::unique_ptr<ChunkStore> store(new ChunkStore(dir, options));
  STRIPEFS_ASSIGN_OR_RETURN(store->lock_fd_, TakeLock(dir));
  for (const std::string& sub : {dir + "/" + chunk_paths::kSegmentsName,
                                 dir + "/" + chunk_paths::kIndexName}) {
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "cannot create " + sub);
    }
  }
  STRIPEFS_RETURN_IF_ERROR(chunk_paths::FsyncDir(dir));
  STRIPEFS_RETURN_IF_ERROR(store->OpenIndex());
  // A legacy store becomes a segment store that still reads its old files;
  // an older build then refuses it (unknown marker) instead of misreading.
  if (!has_marker || legacy) STRIPEFS_RETURN_IF_ERROR(WriteMarker(dir));

  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0)
    return Status::FromErrno(errno, "statvfs " + dir);
  const uint64_t capacity =
      static_cast<uint64_t>(vfs.f_blocks) * static_cast<uint64_t>(vfs.f_frsize);
  store->reserve_bytes_ = options.reserve_bytes == kScaledReserve
                              ? ScaledChunkReserve(capacity)
                              : options.reserve_bytes;
  store->io_ = std::make_unique<UringFileIo>(options.use_io_uring, dir);
  SegmentSet::Options so;
  so.segment_bytes = ScaledSegmentBytes(options.segment_bytes, capacity);
  so.use_direct_io = options.use_direct_io;
  // A small file system keeps its space for chunks.
  if (capacity / so.segment_bytes >= kMinSegmentsForSpares) {
    so.spare_segments = options.spare_segments;
    so.spare_min_free_bytes = store->reserve_bytes_ + 16 * so.segment_bytes;
  }
  store->segments_ =
      std::make_unique<SegmentSet>(dir + "/" + chunk_paths::kSegmentsName, so);
  STRIPEFS_RETURN_IF_ERROR(store->OpenSegments());
  store->segments_->StartFiller();
  store->reserve_fd_.Reset(
      ::open((dir + "/" + chunk_paths::kIndexReserveName).c_str(),
             O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  store->RestoreIndexReserve();

  if (options.sweep_on_open) {
    auto rep = store->Sweep();
    if (!rep.ok()) return rep.status().Annotate("sweep of " + dir);
    const SweepReport& r = *rep;
    if (r.temp_files_removed || r.orphans_removed || r.missing_dropped ||
        r.unknown_files) {
      Log(dir,
          "open: removed %" PRIu64 " temp files and %" PRIu64
          " orphan chunk files, dropped %" PRIu64
          " index entries whose data is missing, left %" PRIu64
          " unknown files in data/",
          r.temp_files_removed, r.orphans_removed, r.missing_dropped,
          r.unknown_files);
    }
  }
  std::map<uint64_t, SegmentUsage> usage;
  STRIPEFS_RETURN_IF_ERROR(store->RecountFromIndex(&usage));
  ChunkStore* self = store.get();
  store->committer_ = std::thread([self] { self->CommitLoop(); });
  store->indexer_ = std::thread([self] { self->IndexLoop(); });
  if (options.compact_bytes_per_sec > 0) {
    store->compactor_ = std::thread([self] { self->CompactLoop(); });
  }
  return store;
}

Status ChunkStore::OpenIndex() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.paranoid_checks = true;
  ApplyRocksGlue(&o, "chunk store " + dir_);
  // The index is small: entries are ~50 bytes plus 4 per 4 KiB of data.
  o.write_buffer_size = 8 << 20;
  rocksdb::DB* raw = nullptr;
  std::string path = dir_ + "/" + chunk_paths::kIndexName;
  rocksdb::Status s = rocksdb::DB::Open(o, path, &raw);
  if (!s.ok()) {
    if (IsRocksNoSpace(s)) {
      return Status::NoSpace("cannot open chunk index " + path + ": " +
                             RocksMessage(s) + "; free space on " + dir_);
    }
    return Status::Corruption("cannot open chunk index " + path + ": " +
                              RocksMessage(s));
  }
  db_.reset(raw);
  return Status::Ok();
}

Status ChunkStore::OpenSegments() {
  std::map<uint64_t, SegmentUsage> usage;
  STRIPEFS_RETURN_IF_ERROR(RecountFromIndex(&usage));
  // Pending records of a batch that was not confirmed: the entries they
  // replaced may have to be put back, so their segments and tails are held
  // (counted live) until RecoverPending has decided.
  std::vector<std::string> pending_keys;
  std::vector<PendingEntry> pending;
  std::map<uint64_t, SegmentUsage> held;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
    for (it->Seek(std::string(1, kPendingKeyPrefix));
         it->Valid() && it->key().size() > 0 &&
         it->key()[0] == kPendingKeyPrefix;
         it->Next()) {
      pending_keys.push_back(it->key().ToString());
      auto rec = DecodePendingRecord(
          std::string_view(it->value().data(), it->value().size()));
      if (!rec.ok()) {
        // Nothing to check from it; reads of its entries still verify.
        ++malformed_;
        Log(dir_, "open: malformed pending record dropped: %s",
            rec.status().message().c_str());
        continue;
      }
      for (PendingEntry& e : *rec) pending.push_back(std::move(e));
    }
    if (!it->status().ok()) {
      return Status::Corruption("cannot scan pending records of " + dir_ +
                                ": " + RocksMessage(it->status()));
    }
  }
  for (const PendingEntry& e : pending) {
    if (!e.has_old || !e.old.in_segment) continue;
    for (const ChunkPiece& p : e.old.pieces) {
      const uint64_t end = p.segment_offset + SegmentExtentBytes(p.length);
      for (auto* m : {&usage, &held}) {
        SegmentUsage& u = (*m)[p.segment];
        u.live_bytes += SegmentExtentBytes(p.length);
        u.live_entries += 1;
        u.end = std::max(u.end, end);
      }
    }
  }
  uint64_t removed = 0;
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<uint64_t> missing,
                            segments_->Load(usage, &removed));
  if (removed > 0) {
    Log(dir_, "open: removed %" PRIu64 " segments no index entry points to",
        removed);
  }
  if (!missing.empty()) {
    STRIPEFS_RETURN_IF_ERROR(DropMissing(missing));
  }
  if (pending_keys.empty()) return Status::Ok();
  return RecoverPending(pending, pending_keys, held);
}

Status ChunkStore::DropMissing(const std::vector<uint64_t>& missing) {
  // Entries into a segment file that is gone are missing chunks.
  std::vector<std::pair<ChunkId, uint64_t>> gone;
  STRIPEFS_RETURN_IF_ERROR(ScanIndex([&](const ChunkId& id, uint64_t version,
                                         const ChunkIndexValue* v) {
    if (v == nullptr || !v->in_segment) return;
    bool lost = false;
    for (const ChunkPiece& p : v->pieces) {
      lost |=
          std::find(missing.begin(), missing.end(), p.segment) != missing.end();
    }
    if (lost) gone.emplace_back(id, version);
  }));
  for (const auto& [id, version] : gone) {
    NoteMissing(id, version);
    STRIPEFS_RETURN_IF_ERROR(DropEntry(id, version));
  }
  return Status::Ok();
}

Status ChunkStore::RecoverPending(
    const std::vector<PendingEntry>& entries,
    const std::vector<std::string>& keys,
    const std::map<uint64_t, SegmentUsage>& held) {
  const uint64_t crc_errors_before = crc_errors_.load();
  std::map<uint64_t, bool> verified_segments;
  for (const PendingEntry& e : entries) {
    bool found = false;
    ChunkIndexValue v;
    Status gs = GetEntry(e.id, e.version, &found, &v);
    if (!gs.ok() && gs.code() != EBADMSG) return gs;
    // Gone, malformed (reads say EBADMSG) or changed by a later batch.
    if (!gs.ok() || !found || !v.in_segment ||
        std::find(v.pieces.begin(), v.pieces.end(), e.piece) ==
            v.pieces.end()) {
      continue;
    }
    std::vector<uint8_t> buf(e.piece.length);
    Status rs =
        ReadVerifiedRange(e.id, e.version, v, e.piece.chunk_offset, buf);
    if (rs.ok()) {
      verified_segments[e.piece.segment] = true;
      ++pending_verified_;
      continue;
    }
    // Only "the bytes are not there" rolls back; an I/O error leaves the
    // decision to the next open.
    if (rs.code() != EBADMSG && rs.code() != ENOENT) {
      return rs.Annotate("verifying an unconfirmed write at open");
    }
    ++pending_rolled_back_;
    bool old_there = e.has_old;
    for (const ChunkPiece& p : e.old.pieces) {
      old_there &= !e.old.in_segment || segments_->Get(p.segment) != nullptr;
    }
    if (!old_there) {
      STRIPEFS_RETURN_IF_ERROR(DropEntry(e.id, e.version));
      continue;
    }
    // Put back the entry it replaced (its bytes were held at load).
    const std::string key = EncodeChunkKey(e.id, e.version);
    STRIPEFS_RETURN_IF_ERROR(IndexWrite(
        [&](rocksdb::WriteBatch* b) { b->Put(key, EncodeChunkValue(e.old)); }));
    CommitOp op;
    op.id = e.id;
    op.keys = {key};
    op.value = e.old;
    op.freed.push_back({e.version, v});
    std::vector<std::pair<uint64_t, ChunkIndexValue>> all;
    STRIPEFS_RETURN_IF_ERROR(GatherVersions(e.id, &all));
    for (auto& [ver, val] : all) {
      if (ver != e.version) op.others.push_back(std::move(val));
    }
    ApplyLive(op);
    PunchHoles(&op.holes);
  }
  crc_errors_ = crc_errors_before;  // expected: those writes never finished
  // What verified may still sit in the page cache only (a killed process):
  // made durable before its record goes.
  for (const auto& [seq, unused] : verified_segments) {
    std::shared_ptr<SegmentFile> f = segments_->Get(seq);
    if (!f) continue;
    STRIPEFS_RETURN_IF_ERROR(io_->DataSync(f->write_fd.get()));
    data_syncs_.fetch_add(1, std::memory_order_relaxed);
  }
  STRIPEFS_RETURN_IF_ERROR(IndexWrite([&](rocksdb::WriteBatch* b) {
    for (const std::string& k : keys) b->Delete(k);
  }));
  for (const auto& [seq, u] : held) {
    segments_->RemoveLive(seq, u.live_bytes, u.live_entries);
  }
  pending_records_ = keys.size();
  Log(dir_,
      "open: %zu pending records: %" PRIu64
      " unconfirmed writes verified, %" PRIu64
      " rolled back (their bytes had not reached the disk)",
      keys.size(), pending_verified_, pending_rolled_back_);
  return Status::Ok();
}

Status ChunkStore::RecountFromIndex(std::map<uint64_t, SegmentUsage>* usage) {
  uint64_t chunks = 0, bytes = 0, malformed = 0;
  // Versions of one id are adjacent in key order: their pieces count once
  // per segment byte (ApplyLive does the same on every change).
  ChunkId current;
  std::vector<ChunkIndexValue> versions;
  auto flush = [&] {
    std::vector<const ChunkIndexValue*> ptrs;
    for (const auto& v : versions) ptrs.push_back(&v);
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> per_segment;
    UniqueSegmentBytes(ptrs, &per_segment);
    for (const auto& [seq, be] : per_segment) {
      if (seq == 0) continue;
      SegmentUsage& u = (*usage)[seq];
      u.live_bytes += be.first;
      u.end = std::max(u.end, be.second);
      for (const auto& v : versions) {
        bool in = false;
        for (const ChunkPiece& p : v.pieces) in |= p.segment == seq;
        u.live_entries += in ? 1 : 0;
      }
    }
    versions.clear();
  };
  Status st =
      ScanIndex([&](const ChunkId& id, uint64_t, const ChunkIndexValue* v) {
        if (v == nullptr) {
          ++malformed;
          return;
        }
        if (id != current) flush();
        current = id;
        ++chunks;
        bytes += v->length;
        if (v->in_segment) versions.push_back(*v);
      });
  flush();
  if (!st.ok()) return Status::Corruption(st.message());
  if (malformed > 0) {
    Log(dir_,
        "%" PRIu64
        " malformed index entries (ignored; reads of them return "
        "EBADMSG)",
        malformed);
  }
  chunks_ = chunks;
  bytes_ = bytes;
  malformed_ = malformed;
  return Status::Ok();
}

Status ChunkStore::ScanIndex(const IndexVisitor& fn) {
  PrefixScan it(db_.get(), std::string(1, kChunkKeyPrefix));
  for (; it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() == 0 || k[0] != kChunkKeyPrefix) break;
    ChunkId id;
    uint64_t version = 0;
    auto v = DecodeChunkValue(
        std::string_view(it->value().data(), it->value().size()));
    const bool key_ok =
        DecodeChunkKey(std::string_view(k.data(), k.size()), &id, &version)
            .ok();
    fn(id, version, key_ok && v.ok() ? &*v : nullptr);
  }
  if (!it->status().ok()) {
    return Status::IoError("cannot scan chunk index of " + dir_ + ": " +
                           RocksMessage(it->status()));
  }
  return Status::Ok();
}

std::shared_mutex& ChunkStore::LockFor(const ChunkId& id) {
  return chunk_locks_[ChunkIdHash()(id) % kLockStripes];
}

template <typename Lock>
std::vector<Lock> ChunkStore::LockInOrder(const std::vector<ChunkId>& ids) {
  std::vector<std::shared_mutex*> mutexes;
  mutexes.reserve(ids.size());
  for (const ChunkId& id : ids) mutexes.push_back(&LockFor(id));
  std::sort(mutexes.begin(), mutexes.end());
  mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
  std::vector<Lock> locks;
  locks.reserve(mutexes.size());
  for (std::shared_mutex* m : mutexes) locks.emplace_back(*m);
  return locks;
}

uint64_t ScaledSegmentBytes(uint64_t wanted, uint64_t capacity_bytes) {
  // Every store of a volume may share one small file system, each with an
  // active, preallocated segment: keep that to 1/64 of the capacity.
  const uint64_t cap =
      std::max<uint64_t>(kMinSegmentBytes, capacity_bytes / 64 / 4096 * 4096);
  return std::min(wanted, cap);
}

uint64_t ScaledChunkReserve(uint64_t capacity_bytes) {
  return kChunkReserveFloorBytes + capacity_bytes / 100 * kChunkReservePercent;
}

Status ChunkStore::NoSpaceStatus(const std::string& what) {
  nospace_.fetch_add(1, std::memory_order_relaxed);
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

Status ChunkStore::GatherForTarget(uint64_t to_version, uint32_t length,
                                   const char* verb, CommitOp* op,
                                   bool* existed) {
  *existed = false;
  std::shared_ptr<const ChunkVersions> cached;
  ChunkVersions scanned;
  STRIPEFS_RETURN_IF_ERROR(VersionsOf(op->id, &cached, &scanned));
  const ChunkVersions& all = cached ? *cached : scanned;
  for (const auto& [ver, val] : all) {
    if (ver != to_version) continue;
    *existed = true;
    if (val.length != length) {
      return Status::Exists(
          std::string("cannot ") + verb + " to " +
          DescribeChunk(op->id, to_version) + ": it is already stored with " +
          std::to_string(val.length) + " bytes, not " + std::to_string(length));
    }
  }
  // A new version lets nothing go, and ApplyLive counts only its fresh
  // extent: the other versions (copies of every piece and block CRC) are
  // needed only when it replaces one.
  if (!*existed) return Status::Ok();
  for (const auto& [ver, val] : all) {
    if (ver != to_version) {
      op->others.push_back(val);
    } else {
      op->freed.push_back({to_version, val});
    }
  }
  return Status::Ok();
}

Status ChunkStore::GetSourceEntry(const ChunkId& id, uint64_t version,
                                  uint32_t length, const char* verb,
                                  ChunkIndexValue* v) {
  bool found = false;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(id, version, &found, v));
  const std::string name = DescribeChunk(id, version);
  if (!found) {
    return Status::NotFound(std::string("cannot ") + verb + " " + name +
                            ": it is not stored in " + dir_);
  }
  if (length > v->length) {
    return Status::InvalidArgument(
        std::string("cannot ") + verb + " " + std::to_string(length) +
        " bytes of " + name + ": it has " + std::to_string(v->length));
  }
  return Status::Ok();
}

Status ChunkStore::GetEntry(const ChunkId& id, uint64_t version, bool* found,
                            ChunkIndexValue* v, bool cache_only) {
  // The version cache is exact for an id it holds (every caller holds the
  // id's chunk lock, under which the cache changes with the index). A miss
  // scans the id's versions and fills the cache, so that the id's next
  // lookup (a read of another block, the next patch) is answered from
  // memory: a read-only client would never fill it otherwise (a reopened
  // store starts empty).
  if (version_cache_) {
    std::shared_ptr<const ChunkVersions> cached;
    ChunkVersions scanned;  // exact while the chunk lock is held
    std::vector<uint64_t> bad;
    STRIPEFS_RETURN_IF_ERROR(
        VersionsOf(id, &cached, &scanned, &bad, cache_only));
    if (bad.empty()) {
      *found = false;
      for (const auto& [ver, val] : cached ? *cached : scanned) {
        if (ver != version) continue;
        *found = true;
        *v = val;
      }
      return Status::Ok();
    }
    // A value of the id did not decode: the point lookup says whether it
    // is this one's.
  }
  std::string raw;
  rocksdb::ReadOptions ro;
  if (cache_only) ro.read_tier = rocksdb::kBlockCacheTier;
  rocksdb::Status s = db_->Get(ro, EncodeChunkKey(id, version), &raw);
  *found = false;
  if (s.IsNotFound()) return Status::Ok();
  if (cache_only && s.IsIncomplete()) {
    return Status::WouldBlock("chunk index entry is not in memory");
  }
  if (!s.ok()) {
    return Status::IoError("chunk index lookup for " +
                           DescribeChunk(id, version) + " in " + dir_ +
                           " failed: " + RocksMessage(s));
  }
  auto dv = DecodeChunkValue(raw);
  if (!dv.ok()) {
    malformed_.fetch_add(1, std::memory_order_relaxed);
    return dv.status().Annotate("index entry of " + DescribeChunk(id, version) +
                                " in " + dir_);
  }
  *found = true;
  *v = std::move(*dv);
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
  missing_.fetch_add(1, std::memory_order_relaxed);
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

Status ChunkStore::IndexWrite(
    const std::function<void(rocksdb::WriteBatch*)>& fill) {
  rocksdb::WriteBatch batch;
  fill(&batch);
  const auto start = std::chrono::steady_clock::now();
  Status st = RocksWriteSynced(db_.get(), &batch, "chunk index of " + dir_);
  index_sync_ns_.fetch_add(NanosSince(start), std::memory_order_relaxed);
  index_syncs_.fetch_add(1, std::memory_order_relaxed);
  if (version_cache_) {
    // After the write (a failed one may have been applied in part): a fill
    // that scanned before it is refused, one that scans after it is right.
    TouchedChunkIds touched;
    if (!batch.Iterate(&touched).ok() || touched.unknown) {
      version_cache_->Clear();
    } else {
      for (const ChunkId& id : touched.ids) version_cache_->Drop(id);
    }
  }
  return st;
}

Result<ChunkLocation> ChunkStore::Locate(const ChunkId& id, uint64_t version,
                                         uint32_t at) {
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
  bool found = false;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(id, version, &found, &v));
  if (!found) {
    return Status::NotFound(DescribeChunk(id, version) + " is not stored");
  }
  if (at != 0 && at >= v.length) {
    return Status::InvalidArgument("byte " + std::to_string(at) + " is past " +
                                   DescribeChunk(id, version));
  }
  ChunkLocation loc;
  loc.length = v.length - at;
  loc.in_segment = v.in_segment;
  loc.pieces = v.pieces.size();
  if (v.in_segment) {
    for (const ChunkPiece& p : v.pieces) {
      if (at < p.chunk_offset || at - p.chunk_offset >= p.length) continue;
      loc.path = dir_ + "/" + chunk_paths::kSegmentsName + "/" +
                 chunk_paths::SegmentFileName(p.segment);
      loc.offset = p.segment_offset + (at - p.chunk_offset);
      loc.length = p.length - (at - p.chunk_offset);
    }
  } else {
    loc.offset = at;
    loc.path = chunk_paths::LegacyChunkPath(data_dir_, id, version);
  }
  return loc;
}

Status ChunkStore::ReadVerified(const ChunkId& id, uint64_t version,
                                const ChunkIndexValue& v,
                                std::vector<uint8_t>* out) {
  out->resize(v.length);
  return ReadVerifiedRange(id, version, v, 0, *out);
}

// One file read of a RangeRead.
struct ChunkStore::RangeReadIo {
  UringFileIo::BatchIo read;
  std::shared_ptr<SegmentFile> seg;  // keeps the file open
  uint64_t at = 0;                   // chunk offset of the first byte
  bool direct = false;               // through the O_DIRECT fd
};

// One ReadVerifiedRange in steps: PlanRange works out the file reads,
// they run (RunRangeReads, several RangeReads' together), FinishRange
// checks them and the CRCs.
struct ChunkStore::RangeRead {
  ChunkId id;
  uint64_t version = 0;
  const ChunkIndexValue* v = nullptr;  // the caller's, outlives this
  uint32_t offset = 0;
  std::span<uint8_t> out;
  // What is read and verified: the whole chunk against its CRC, or (with
  // block CRCs and a partial range) just the blocks [lo, hi) it covers,
  // into `out` or, when that is not the asked range, `bounce`.
  bool by_blocks = false;
  uint64_t lo = 0;
  uint64_t hi = 0;
  AlignedBytes bounce;  // page aligned, so it can take O_DIRECT reads too
  std::span<uint8_t> buf;
  std::vector<RangeReadIo> ios;
};

Status ChunkStore::PlanRange(const ChunkId& id, uint64_t version,
                             const ChunkIndexValue& v, uint32_t offset,
                             std::span<uint8_t> out, RangeRead* rr) {
  rr->id = id;
  rr->version = version;
  rr->v = &v;
  rr->offset = offset;
  rr->out = out;
  const auto length = static_cast<uint32_t>(out.size());
  rr->by_blocks = v.block_shift != 0 && !(offset == 0 && length == v.length);
  rr->lo = 0;
  rr->hi = v.length;
  if (rr->by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    rr->lo = offset / block * block;
    rr->hi = std::min<uint64_t>(
        v.length, (uint64_t{offset} + length + block - 1) / block * block);
  }
  // Read straight into the caller's buffer when the verified range is the
  // asked one (the whole chunk, or whole CRC blocks); else the covered
  // blocks go to a bounce buffer and the asked bytes are copied out.
  rr->buf = out;
  if (rr->lo != offset || rr->hi != uint64_t{offset} + length) {
    rr->bounce.resize(rr->hi - rr->lo);
    rr->buf = rr->bounce;
  }
  const uint64_t lo = rr->lo, hi = rr->hi;
  if (!v.in_segment) {
    // A legacy file of exactly `length` bytes: read here, at once.
    const std::string path =
        chunk_paths::LegacyChunkPath(data_dir_, id, version);
    UniqueFd legacy_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!legacy_fd.valid()) {
      int err = errno;
      if (err == ENOENT) return Status::NotFound(path + " is missing");
      return Status::FromErrno(err, "open " + path);
    }
    struct stat st;
    if (::fstat(legacy_fd.get(), &st) != 0) {
      return Status::FromErrno(errno, "fstat " + path);
    }
    if (static_cast<uint64_t>(st.st_size) != v.length) {
      crc_errors_.fetch_add(1, std::memory_order_relaxed);
      return Status::Corruption(
          DescribeChunk(id, version) + " in " + dir_ + ": data file " + path +
          " has " + std::to_string(st.st_size) + " bytes, the index says " +
          std::to_string(v.length) + "; treat the chunk as lost and repair it");
    }
    if (rr->buf.empty()) return Status::Ok();
    RangeReadIo io;
    io.read.len = rr->buf.size();
    io.read.got = io_->Read(legacy_fd.get(), rr->buf.data(), io.read.len, lo);
    io.at = lo;
    return CheckRangeRead(*rr, io, path);
  }
  // One read per piece the range covers (two when it ends in a short
  // block that goes through the page cache, see kDirectReadMinBytes).
  for (const ChunkPiece& p : v.pieces) {
    const uint64_t s = std::max<uint64_t>(lo, p.chunk_offset);
    const uint64_t e =
        std::min<uint64_t>(hi, uint64_t{p.chunk_offset} + p.length);
    if (s >= e) continue;
    std::shared_ptr<SegmentFile> seg = segments_->Get(p.segment);
    if (!seg) {
      return Status::NotFound(
          "segment " + dir_ + "/" + chunk_paths::kSegmentsName + "/" +
          chunk_paths::SegmentFileName(p.segment) + " is missing");
    }
    uint8_t* dst = rr->buf.data() + (s - lo);
    const uint64_t pos = p.segment_offset + (s - p.chunk_offset);
    const uint64_t n = e - s;
    // The aligned body of a large range: O_DIRECT through the segment's
    // write fd (the disk's DMA lands in `dst`; no page-cache copy, and
    // io_uring runs it without punting to a worker thread).
    uint64_t direct = 0;
    if (seg->direct && n >= kDirectReadMinBytes && pos % kSegmentAlign == 0 &&
        reinterpret_cast<uintptr_t>(dst) % kSegmentAlign == 0) {
      direct = n / kSegmentAlign * kSegmentAlign;
      RangeReadIo io;
      io.read.fd = seg->write_fd.get();
      io.read.buf = dst;
      io.read.len = direct;
      io.read.offset = pos;
      io.seg = seg;
      io.at = s;
      io.direct = true;
      rr->ios.push_back(std::move(io));
    }
    if (direct < n) {
      RangeReadIo io;
      io.read.fd = seg->buffered_fd.get();
      io.read.buf = dst + direct;
      io.read.len = n - direct;
      io.read.offset = pos + direct;
      io.seg = std::move(seg);
      io.at = s + direct;
      rr->ios.push_back(std::move(io));
    }
  }
  return Status::Ok();
}

void ChunkStore::RunRangeReads(std::span<RangeRead* const> rrs) {
  std::vector<UringFileIo::BatchIo> batch;
  for (const RangeRead* rr : rrs) {
    for (const RangeReadIo& io : rr->ios) batch.push_back(io.read);
  }
  io_->RunBatch(batch);
  size_t at = 0;
  for (RangeRead* rr : rrs) {
    for (RangeReadIo& io : rr->ios) io.read.got = std::move(batch[at++].got);
  }
}

Status ChunkStore::CheckRangeRead(const RangeRead& rr, const RangeReadIo& io,
                                  const std::string& path) {
  if (!io.read.got.ok()) {
    Status e = io.read.got.status().Annotate("reading " + path);
    // ENOENT here cannot mean "data missing" to the caller.
    return e.code() == ENOENT ? Status::IoError(e.message()) : e;
  }
  if (*io.read.got != io.read.len) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    return Status::Corruption(DescribeChunk(rr.id, rr.version) + " in " + dir_ +
                              ": " + path + " ended after " +
                              std::to_string(io.at + *io.read.got) +
                              " of its " + std::to_string(rr.v->length) +
                              " bytes; treat the chunk as lost and "
                              "repair it");
  }
  return Status::Ok();
}

Status ChunkStore::FinishRange(RangeRead* rr) {
  const ChunkIndexValue& v = *rr->v;
  for (RangeReadIo& io : rr->ios) {
    if (io.direct) {
      if (io.read.got.ok() || io.read.got.status().code() != EINVAL) {
        if (io.read.got.ok() && *io.read.got == io.read.len) {
          direct_read_bytes_.fetch_add(io.read.len, std::memory_order_relaxed);
        }
      } else {
        // Alignment the device refuses: the page cache.
        io.read.fd = io.seg->buffered_fd.get();
        io.read.got =
            io_->Read(io.read.fd, io.read.buf, io.read.len, io.read.offset);
      }
    }
    STRIPEFS_RETURN_IF_ERROR(CheckRangeRead(*rr, io, io.seg->path));
  }
  // Where chunk byte `at` is, for messages.
  auto where = [&](uint64_t at) -> std::string {
    if (!v.in_segment) {
      return "file " +
             chunk_paths::LegacyChunkPath(data_dir_, rr->id, rr->version) +
             " at " + std::to_string(at);
    }
    for (const ChunkPiece& p : v.pieces) {
      if (at >= p.chunk_offset && at - p.chunk_offset < p.length) {
        return "file " + dir_ + "/" + chunk_paths::kSegmentsName + "/" +
               chunk_paths::SegmentFileName(p.segment) + " at " +
               std::to_string(p.segment_offset + (at - p.chunk_offset));
      }
    }
    return "no piece";
  };
  auto mismatch = [&](uint32_t stored, uint32_t computed,
                      const std::string& what, uint64_t at) {
    crc_errors_.fetch_add(1, std::memory_order_relaxed);
    char detail[128];
    std::snprintf(detail, sizeof(detail),
                  " (stored CRC32C 0x%08x, computed 0x%08x), ", stored,
                  computed);
    return Status::Corruption(DescribeChunk(rr->id, rr->version) + " in " +
                              dir_ + " failed CRC32C " + "verification of " +
                              what + detail + where(at) +
                              "; treat the chunk as lost and repair it");
  };
  const std::span<uint8_t> buf = rr->buf;
  if (rr->by_blocks) {
    const uint64_t block = uint64_t{1} << v.block_shift;
    for (uint64_t b = rr->lo / block; b * block < rr->hi; ++b) {
      const uint64_t start = b * block - rr->lo;
      const uint64_t n = std::min<uint64_t>(block, rr->hi - b * block);
      const uint32_t crc = ec::Crc32c(buf.data() + start, n);
      if (crc != v.block_crcs[b]) {
        return mismatch(v.block_crcs[b], crc, "block " + std::to_string(b),
                        b * block);
      }
    }
  } else {
    const uint32_t crc = ec::Crc32c(buf.data(), buf.size());
    if (crc != v.crc32c) return mismatch(v.crc32c, crc, "the whole chunk", 0);
  }
  if (!rr->bounce.empty() && !rr->out.empty()) {
    std::memcpy(rr->out.data(), rr->bounce.data() + (rr->offset - rr->lo),
                rr->out.size());
  }
  return Status::Ok();
}

Status ChunkStore::ReadVerifiedRange(const ChunkId& id, uint64_t version,
                                     const ChunkIndexValue& v, uint32_t offset,
                                     std::span<uint8_t> out) {
  RangeRead rr;
  STRIPEFS_RETURN_IF_ERROR(PlanRange(id, version, v, offset, out, &rr));
  RangeRead* one = &rr;
  RunRangeReads({&one, 1});
  return FinishRange(&rr);
}

Result<std::vector<uint8_t>> ChunkStore::ReadChunk(const ChunkId& id,
                                                   uint64_t version,
                                                   uint32_t offset,
                                                   uint32_t length) {
  std::vector<uint8_t> buf;
  STRIPEFS_RETURN_IF_ERROR(ReadRange(id, version, offset, length, [&] {
    buf.resize(length);
    return std::span<uint8_t>(buf);
  }));
  return buf;
}

Status ChunkStore::ReadChunkInto(const ChunkId& id, uint64_t version,
                                 uint32_t offset, std::span<uint8_t> out) {
  if (out.size() > UINT32_MAX) {
    return Status::InvalidArgument("chunk read of " +
                                   std::to_string(out.size()) +
                                   " bytes is larger than any chunk");
  }
  return ReadRange(id, version, offset, static_cast<uint32_t>(out.size()),
                   [out] { return out; });
}

Status ChunkStore::TryReadChunkInto(const ChunkId& id, uint64_t version,
                                    uint32_t offset, std::span<uint8_t> out) {
  if (out.size() > UINT32_MAX) {
    return Status::InvalidArgument("chunk read of " +
                                   std::to_string(out.size()) +
                                   " bytes is larger than any chunk");
  }
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id), std::try_to_lock);
  if (!chunk_lock.owns_lock()) {
    return Status::WouldBlock("chunk is being changed");
  }
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(LookUpRange(id, version, offset,
                                       static_cast<uint32_t>(out.size()), &v,
                                       /*cache_only=*/true));
  if (!v.in_segment) return Status::WouldBlock("legacy chunk file");
  RangeRead rr;
  Status ps = PlanRange(id, version, v, offset, out, &rr);
  // A missing segment: ReadChunkInto counts it and drops the entry.
  if (ps.code() == ENOENT) return Status::WouldBlock("segment missing");
  STRIPEFS_RETURN_IF_ERROR(ps);
  for (RangeReadIo& io : rr.ios) {
    // The page cache only, so the buffered fd also for what ReadChunkInto
    // would read O_DIRECT.
    io.direct = false;
    io.read.fd = io.seg->buffered_fd.get();
    io.read.got = UringFileIo::ReadIfCached(io.read.fd, io.read.buf,
                                            io.read.len, io.read.offset);
    if (!io.read.got.ok() && io.read.got.status().IsWouldBlock()) {
      return io.read.got.status();
    }
  }
  STRIPEFS_RETURN_IF_ERROR(FinishRange(&rr));
  reads_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ChunkStore::LookUpRange(const ChunkId& id, uint64_t version,
                               uint32_t offset, uint32_t length,
                               ChunkIndexValue* v, bool cache_only) {
  bool found = false;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(id, version, &found, v, cache_only));
  if (!found) {
    return Status::NotFound(DescribeChunk(id, version) + " is not stored in " +
                            dir_);
  }
  if (static_cast<uint64_t>(offset) + length > v->length) {
    return Status::InvalidArgument(
        "read of [" + std::to_string(offset) + ", " +
        std::to_string(static_cast<uint64_t>(offset) + length) + ") of " +
        DescribeChunk(id, version) + " is past its end (" +
        std::to_string(v->length) + " bytes)");
  }
  return Status::Ok();
}

Status ChunkStore::ReadRange(const ChunkId& id, uint64_t version,
                             uint32_t offset, uint32_t length,
                             const std::function<std::span<uint8_t>()>& dest) {
  // For messages only: no string is built on the success path.
  auto name = [&] { return DescribeChunk(id, version); };
  std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
  bool found = false;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(LookUpRange(id, version, offset, length, &v));
  Status vs = ReadVerifiedRange(id, version, v, offset, dest());
  if (vs.code() == ENOENT) {
    // Indexed but gone: drop the entry (exclusively; no other mutation of
    // this chunk can run in between, since mutations hold it exclusively).
    chunk_lock.unlock();
    std::unique_lock<std::shared_mutex> excl(LockFor(id));
    ChunkIndexValue again;
    Status gs = GetEntry(id, version, &found, &again);
    if (gs.ok() && found && EncodeChunkValue(again) != EncodeChunkValue(v)) {
      return Status::IoError("reading " + name() + " in " + dir_ +
                             " raced with a concurrent rewrite; retry");
    }
    if (!gs.ok() || !found) {
      return Status::NotFound(name() + " is not stored in " + dir_);
    }
    NoteMissing(id, version);
    Status st = DropEntry(id, version);
    if (!st.ok()) {
      Log(dir_, "cannot drop index entry of missing %s: %s", name().c_str(),
          st.ToString().c_str());
    }
    return Status::NotFound(name() + " is indexed in " + dir_ +
                            " but its data is missing (counted, entry "
                            "dropped); repair rebuilds it");
  }
  if (!vs.ok()) return vs;
  reads_.fetch_add(1, std::memory_order_relaxed);
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

Status ChunkStore::PrepareClone(const ChunkId& id, uint64_t from_version,
                                uint64_t to_version, uint32_t length,
                                CommitOp* op, bool* existed, Prep* prep) {
  *prep = Prep::kDefault;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(
      GetSourceEntry(id, from_version, length, "clone", &v));
  if (length != v.length || !v.in_segment) return Status::Ok();
  STRIPEFS_RETURN_IF_ERROR(CheckSpace(0));
  // Shares the source's pieces without reading them: versions are
  // immutable, and a corrupt piece is found by whoever reads either
  // version (and by scrub), never hidden.
  *prep = Prep::kReady;
  op->id = id;
  op->keys = {EncodeChunkKey(id, to_version)};
  op->value = std::move(v);
  return GatherForTarget(to_version, length, "clone", op, existed);
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
      patches_whole_.fetch_add(1, std::memory_order_relaxed);
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

namespace {

// A patch's windows: each range rounded out to `block`s (at most to the
// chunk's end), windows that touch merged. Ranges are sorted and disjoint.
std::vector<PatchRange> PatchWindows(std::span<const PatchRange> ranges,
                                     uint64_t block, uint32_t length) {
  std::vector<PatchRange> windows;
  for (const PatchRange& r : ranges) {
    const uint64_t lo = r.offset / block * block;
    const uint64_t hi = std::min<uint64_t>(
        length, (uint64_t{r.offset} + r.length + block - 1) / block * block);
    if (!windows.empty() &&
        lo <= uint64_t{windows.back().offset} + windows.back().length) {
      windows.back().length = static_cast<uint32_t>(hi - windows.back().offset);
    } else {
      windows.push_back(
          {static_cast<uint32_t>(lo), static_cast<uint32_t>(hi - lo)});
    }
  }
  return windows;
}

// `pieces` without the chunk bytes `windows` cover (both sorted).
std::vector<ChunkPiece> PiecesOutside(const std::vector<ChunkPiece>& pieces,
                                      const std::vector<PatchRange>& windows) {
  std::vector<ChunkPiece> kept;
  for (const ChunkPiece& p : pieces) {
    uint64_t from = p.chunk_offset;
    const uint64_t pe = uint64_t{p.chunk_offset} + p.length;
    for (const PatchRange& w : windows) {
      const uint64_t we = uint64_t{w.offset} + w.length;
      if (we <= from) continue;
      if (w.offset >= pe) break;
      if (w.offset > from) {
        ChunkPiece part = p;
        part.chunk_offset = static_cast<uint32_t>(from);
        part.length = static_cast<uint32_t>(w.offset - from);
        part.segment_offset = p.segment_offset + (from - p.chunk_offset);
        kept.push_back(part);
      }
      from = std::min(pe, we);
    }
    if (from < pe) {
      ChunkPiece tail = p;
      tail.chunk_offset = static_cast<uint32_t>(from);
      tail.length = static_cast<uint32_t>(pe - from);
      tail.segment_offset = p.segment_offset + (from - p.chunk_offset);
      kept.push_back(tail);
    }
  }
  return kept;
}

// Per block of `windows` (back to back, as PatchWindows made them from
// `ranges`): how many of its bytes the ranges cover.
std::vector<uint32_t> BytesPerBlock(std::span<const PatchRange> ranges,
                                    const std::vector<PatchRange>& windows,
                                    uint64_t block) {
  size_t n = 0;
  for (const PatchRange& w : windows) n += (w.length + block - 1) / block;
  std::vector<uint32_t> covered(n, 0);
  size_t wi = 0, base = 0;  // blocks before window wi
  for (const PatchRange& r : ranges) {
    const uint64_t end = uint64_t{r.offset} + r.length;
    while (uint64_t{windows[wi].offset} + windows[wi].length <= r.offset) {
      base += (windows[wi].length + block - 1) / block;
      ++wi;
    }
    for (uint64_t b = r.offset / block * block; b < end; b += block) {
      const uint64_t lo = std::max<uint64_t>(b, r.offset);
      const uint64_t hi = std::min<uint64_t>(b + block, end);
      covered[base + (b - windows[wi].offset) / block] +=
          static_cast<uint32_t>(hi - lo);
    }
  }
  return covered;
}

// Copies each range's bytes (`bytes`, range order) to its place in `out`,
// which holds `windows` back to back.
void ScatterIntoWindows(std::span<const PatchRange> ranges,
                        std::span<const uint8_t> bytes,
                        const std::vector<PatchRange>& windows, uint8_t* out) {
  size_t wi = 0, at = 0, from = 0;  // at: where window wi starts in out
  for (const PatchRange& r : ranges) {
    while (uint64_t{windows[wi].offset} + windows[wi].length <= r.offset) {
      at += windows[wi].length;
      ++wi;
    }
    std::memcpy(out + at + (r.offset - windows[wi].offset), bytes.data() + from,
                r.length);
    from += r.length;
  }
}

}  // namespace

Status ChunkStore::PreparePatch(const ChunkId& id, uint64_t from_version,
                                uint64_t to_version, uint32_t length,
                                std::span<const PatchRange> ranges,
                                std::span<const uint8_t> bytes, CommitOp* op,
                                AlignedBytes* data, bool* existed, Prep* prep) {
  *prep = Prep::kReady;
  ChunkIndexValue v;
  STRIPEFS_RETURN_IF_ERROR(
      GetSourceEntry(id, from_version, length, "patch", &v));
  // The windows (a block is at least a segment unit here, so each new
  // piece starts aligned), and the source's pieces without them.
  const uint64_t block = uint64_t{1} << v.block_shift;
  const std::vector<PatchRange> windows = PatchWindows(ranges, block, length);
  if (windows.empty()) {
    *prep = Prep::kDefault;  // nothing to patch: callers make it a clone
    return Status::Ok();
  }
  uint64_t total = 0;
  for (const PatchRange& w : windows) total += w.length;
  std::vector<ChunkPiece> kept;
  if (v.in_segment) kept = PiecesOutside(v.pieces, windows);
  const bool whole = length != v.length || !v.in_segment ||
                     block < kSegmentAlign || total * 2 > length ||
                     kept.size() + windows.size() > kMaxChunkPieces;
  if (whole) {
    *prep = Prep::kDefault;
    return Status::Ok();
  }
  if (Status sp = CheckSpace(total); !sp.ok()) {
    *prep = Prep::kNoSpace;
    return sp;
  }
  // The windows' blocks back to back (page aligned, so the segment write
  // needs no staging copy): first the source's bytes of every block the
  // ranges cover only in part (read and verified), then the ranges' bytes.
  data->resize(total);
  const std::vector<uint32_t> covered = BytesPerBlock(ranges, windows, block);
  size_t at = 0, bi = 0;
  for (const PatchRange& w : windows) {
    // Runs of blocks that need the source's bytes, one read each.
    const uint64_t we = uint64_t{w.offset} + w.length;
    auto read_run = [&](uint64_t lo, uint64_t hi) -> Status {
      Status rs = ReadVerifiedRange(
          id, from_version, v, static_cast<uint32_t>(lo),
          std::span<uint8_t>(data->data() + at + (lo - w.offset), hi - lo));
      return rs.Annotate("patching " + DescribeChunk(id, to_version) +
                         " from " + DescribeChunk(id, from_version));
    };
    uint64_t run = we;  // first block of the current run; `we`: none
    for (uint64_t b = w.offset; b < we; b += block, ++bi) {
      if (covered[bi] != std::min<uint64_t>(block, we - b)) {
        if (run == we) run = b;
      } else if (run != we) {
        STRIPEFS_RETURN_IF_ERROR(read_run(run, b));
        run = we;
      }
    }
    if (run != we) STRIPEFS_RETURN_IF_ERROR(read_run(run, we));
    at += w.length;
  }
  ScatterIntoWindows(ranges, bytes, windows, data->data());
  op->id = id;
  op->keys = {EncodeChunkKey(id, to_version)};
  op->has_data = true;
  op->data = *data;
  op->windows = windows;
  op->kept_pieces = std::move(kept);
  op->value.length = length;
  op->value.block_shift = v.block_shift;
  op->value.block_crcs = v.block_crcs;
  at = 0;
  for (const PatchRange& w : windows) {
    const std::vector<uint32_t> fresh =
        ComputeBlockCrcs(data->data() + at, w.length, v.block_shift);
    std::copy(fresh.begin(), fresh.end(),
              op->value.block_crcs.begin() +
                  static_cast<ptrdiff_t>(w.offset / block));
    at += w.length;
  }
  op->value.crc32c =
      CombineBlockCrcs(op->value.block_crcs, length, v.block_shift);
  op->value.in_segment = true;
  return GatherForTarget(to_version, length, "patch", op, existed);
}

void ChunkStore::CountStored(ChunkWriteOp::Kind kind, uint64_t length,
                             bool existed) {
  if (!existed) {
    chunks_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(length, std::memory_order_relaxed);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  if (kind == ChunkWriteOp::Kind::kClone) {
    clones_.fetch_add(1, std::memory_order_relaxed);
  } else if (kind == ChunkWriteOp::Kind::kPatch) {
    patches_in_place_.fetch_add(1, std::memory_order_relaxed);
  }
}

// One op of an ApplyChunkOps batch.
struct ChunkStore::BatchOp {
  CommitOp op;
  AlignedBytes data;  // a patch's new blocks, or a whole patch's chunk
  bool existed = false;
  bool queued = false;
  bool whole = false;  // a patch stored as a whole new version
};

Status ChunkStore::PrepareWholePatch(const ChunkWriteOp& w, BatchOp* b,
                                     Prep* prep) {
  *prep = Prep::kDefault;
  ChunkIndexValue v;
  bool found = false;
  STRIPEFS_RETURN_IF_ERROR(GetEntry(w.id, w.from_version, &found, &v));
  // A resize, a legacy source, a missing one or a full store: the one-op
  // path, which reports or compacts. `length` comes from a peer: nothing
  // is allocated until the source is found to be that long.
  if (!found || !v.in_segment || v.length != w.length ||
      w.length > options_.max_chunk_bytes || !CheckSpace(w.length).ok()) {
    return Status::Ok();
  }
  b->data.resize(w.length);
  const std::span<uint8_t> chunk(b->data.data(), w.length);
  if (!ReadVerifiedRange(w.id, w.from_version, v, 0, chunk).ok()) {
    return Status::Ok();  // the one-op path reads it again and says why
  }
  if (w.ranges.empty()) {
    std::memcpy(chunk.data() + w.offset, w.bytes.data(), w.bytes.size());
  } else {
    ScatterPatchRanges(w.ranges, w.bytes, 0, chunk);
  }
  *prep = Prep::kReady;
  b->whole = true;
  patches_whole_.fetch_add(1, std::memory_order_relaxed);
  InitWriteOp(w.id, w.to_version, chunk, &b->op);
  return GatherForTarget(w.to_version, w.length, "patch", &b->op, &b->existed);
}

Status ChunkStore::PrepareBatchOp(const ChunkWriteOp& w, BatchOp* b,
                                  Prep* prep) {
  *prep = Prep::kDefault;
  switch (w.kind) {
    case ChunkWriteOp::Kind::kWrite:
      if (w.to_version == 0 || w.bytes.size() > options_.max_chunk_bytes ||
          !CheckSpace(w.bytes.size()).ok()) {
        return Status::Ok();  // WriteChunk's errors, or it compacts first
      }
      *prep = Prep::kReady;
      InitWriteOp(w.id, w.to_version, w.bytes, &b->op);
      return GatherForTarget(w.to_version,
                             static_cast<uint32_t>(w.bytes.size()), "write",
                             &b->op, &b->existed);
    case ChunkWriteOp::Kind::kClone:
      if (w.to_version == 0 || w.to_version == w.from_version) {
        return Status::Ok();
      }
      return PrepareClone(w.id, w.from_version, w.to_version, w.length, &b->op,
                          &b->existed, prep);
    case ChunkWriteOp::Kind::kPatch:
      break;
  }
  if (w.to_version == 0 || w.to_version == w.from_version || w.bytes.empty() ||
      (!w.ranges.empty() &&
       !CheckPatchRanges(w.ranges, w.length, w.bytes.size()).ok())) {
    return Status::Ok();
  }
  if (w.ranges.empty() && uint64_t{w.offset} + w.bytes.size() > w.length) {
    return Status::Ok();
  }
  const PatchRange one{w.offset, static_cast<uint32_t>(w.bytes.size())};
  Status ps = PreparePatch(
      w.id, w.from_version, w.to_version, w.length,
      w.ranges.empty() ? std::span<const PatchRange>(&one, 1) : w.ranges,
      w.bytes, &b->op, &b->data, &b->existed, prep);
  // Most of the chunk: a whole new version, in this batch too.
  if (ps.ok() && *prep == Prep::kDefault) return PrepareWholePatch(w, b, prep);
  return ps;
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
    batched_ops_.fetch_add(written.size(), std::memory_order_relaxed);
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

Status ChunkStore::ReadChunkIntoBy(
    const ChunkId& id, uint64_t version, uint32_t offset,
    std::span<uint8_t> out, std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) {
    return Status(ETIMEDOUT, "reading " + DescribeChunk(id, version) + " in " +
                                 dir_ +
                                 ": the deadline passed before it started");
  }
  return ReadChunkInto(id, version, offset, out);
}

std::vector<Status> ChunkStore::ReadChunkRanges(
    std::span<const ChunkRangeRead> reads,
    std::chrono::steady_clock::time_point deadline) {
  std::vector<Status> out(reads.size());
  if (std::chrono::steady_clock::now() >= deadline) {
    for (Status& st : out) {
      st = Status(ETIMEDOUT, "reading chunks in " + dir_ +
                                 ": the deadline passed before they started");
    }
    return out;
  }
  // Every read's chunk lock, shared, each stripe once and in address order
  // (writers hold one chunk lock, or several in this order).
  std::vector<ChunkId> ids;
  ids.reserve(reads.size());
  for (const ChunkRangeRead& r : reads) ids.push_back(r.id);
  auto locks = LockInOrder<std::shared_lock<std::shared_mutex>>(ids);

  // Look every read up and plan it, then all their file reads at once.
  std::vector<ChunkIndexValue> values(reads.size());
  std::vector<RangeRead> rrs(reads.size());
  std::vector<RangeRead*> planned;
  planned.reserve(reads.size());
  std::vector<bool> data_missing(reads.size(), false);
  for (size_t i = 0; i < reads.size(); ++i) {
    const ChunkRangeRead& r = reads[i];
    if (r.out.size() > UINT32_MAX) {
      out[i] = Status::InvalidArgument("chunk read of " +
                                       std::to_string(r.out.size()) +
                                       " bytes is larger than any chunk");
      continue;
    }
    out[i] = LookUpRange(r.id, r.version, r.offset,
                         static_cast<uint32_t>(r.out.size()), &values[i]);
    if (!out[i].ok()) continue;
    out[i] = PlanRange(r.id, r.version, values[i], r.offset, r.out, &rrs[i]);
    if (out[i].ok()) {
      planned.push_back(&rrs[i]);
    } else {
      data_missing[i] = out[i].code() == ENOENT;
    }
  }
  RunRangeReads(planned);
  read_batches_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!out[i].ok()) continue;
    out[i] = FinishRange(&rrs[i]);
    if (out[i].ok()) reads_.fetch_add(1, std::memory_order_relaxed);
  }
  locks.clear();
  // Indexed but gone: the one-read path drops the entry (under the chunk
  // lock held exclusively) and says so.
  for (size_t i = 0; i < reads.size(); ++i) {
    if (data_missing[i]) {
      out[i] = ReadChunkInto(reads[i].id, reads[i].version, reads[i].offset,
                             reads[i].out);
    }
  }
  return out;
}

Status ChunkStore::GatherVersions(
    const ChunkId& id, std::vector<std::pair<uint64_t, ChunkIndexValue>>* out,
    std::vector<uint64_t>* bad) {
  out->clear();
  if (bad != nullptr) bad->clear();
  std::shared_ptr<const ChunkVersions> shared;
  STRIPEFS_RETURN_IF_ERROR(VersionsOf(id, &shared, out, bad));
  if (shared) *out = *shared;  // a cached id has no malformed entries
  return Status::Ok();
}

Status ChunkStore::VersionsOf(const ChunkId& id,
                              std::shared_ptr<const ChunkVersions>* cached,
                              ChunkVersions* scanned,
                              std::vector<uint64_t>* bad, bool cache_only) {
  cached->reset();
  uint64_t token = 0;
  if (version_cache_) {
    if ((*cached = version_cache_->Lookup(id))) return Status::Ok();
    token = version_cache_->Token(id);
  }
  std::vector<uint64_t> malformed;
  bool clean = true;
  STRIPEFS_RETURN_IF_ERROR(
      ScanVersions(id, scanned, &malformed, &clean, cache_only));
  if (version_cache_ && clean) version_cache_->Fill(id, token, *scanned);
  if (bad != nullptr) *bad = std::move(malformed);
  return Status::Ok();
}

Status ChunkStore::ScanVersions(
    const ChunkId& id, std::vector<std::pair<uint64_t, ChunkIndexValue>>* out,
    std::vector<uint64_t>* bad, bool* clean, bool cache_only) {
  out->clear();
  bad->clear();
  *clean = true;
  const std::string prefix = EncodeChunkIdPrefix(id);
  PrefixScan it(db_.get(), prefix, cache_only);
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    ChunkId kid;
    uint64_t ver = 0;
    rocksdb::Slice k = it->key();
    if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &kid, &ver)
             .ok()) {
      *clean = false;
      continue;
    }
    auto v = DecodeChunkValue(
        std::string_view(it->value().data(), it->value().size()));
    if (v.ok()) {
      out->emplace_back(ver, std::move(*v));
    } else {
      *clean = false;
      bad->push_back(ver);
    }
  }
  if (cache_only && it->status().IsIncomplete()) {
    *clean = false;
    return Status::WouldBlock("chunk index entries are not in memory");
  }
  if (!it->status().ok()) {
    return Status::IoError("scanning chunk index of " + dir_ + ": " +
                           RocksMessage(it->status()));
  }
  return Status::Ok();
}

Status ChunkStore::VerifyVersionCache() {
  if (!version_cache_) return Status::Ok();
  for (const auto& [id, snapped] : version_cache_->Snapshot()) {
    std::shared_lock<std::shared_mutex> chunk_lock(LockFor(id));
    // The entry now: no change of this id can be under way (they hold the
    // chunk lock exclusively until their cache update is done).
    std::shared_ptr<const ChunkVersions> cached = version_cache_->Peek(id);
    if (!cached) continue;  // dropped or evicted since the snapshot
    ChunkVersions scanned;
    std::vector<uint64_t> bad;
    bool clean = true;
    STRIPEFS_RETURN_IF_ERROR(ScanVersions(id, &scanned, &bad, &clean));
    auto describe = [](const ChunkVersions& vs) {
      std::string d;
      for (const auto& [ver, val] : vs) {
        d += " " + std::to_string(ver) + "(" + std::to_string(val.length) +
             " bytes, " + std::to_string(val.pieces.size()) + " pieces)";
      }
      return d.empty() ? std::string(" none") : d;
    };
    bool same = clean && scanned.size() == cached->size();
    for (size_t i = 0; same && i < scanned.size(); ++i) {
      same = scanned[i].first == (*cached)[i].first &&
             EncodeChunkValue(scanned[i].second) ==
                 EncodeChunkValue((*cached)[i].second);
    }
    if (!same) {
      return Status::Corruption(
          "version cache of " + dir_ + " disagrees with the index for " +
          DescribeChunk(id, 0) + ": cached" + describe(*cached) + "; index" +
          describe(scanned) +
          (clean ? "" : " (and entries that do not decode)"));
    }
  }
  return Status::Ok();
}

Result<std::vector<ChunkInfo>> ChunkStore::ListChunks(const ChunkInfo& after,
                                                      uint32_t limit) {
  if (limit == 0) {
    return Status::InvalidArgument("ListChunks needs a limit > 0");
  }
  std::vector<ChunkInfo> out;
  const std::string start = EncodeChunkKey(after.id, after.version);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator({}));
  for (it->Seek(start); it->Valid() && out.size() < limit; it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() == 0 || k[0] != kChunkKeyPrefix) break;
    if (k.compare(start) == 0) continue;
    ChunkInfo info;
    if (!DecodeChunkKey(std::string_view(k.data(), k.size()), &info.id,
                        &info.version)
             .ok()) {
      continue;  // counted at open; cannot be named as a chunk
    }
    auto v = DecodeChunkValue(
        std::string_view(it->value().data(), it->value().size()));
    if (!v.ok()) continue;  // reads of it return EBADMSG
    info.length = v->length;
    info.crc32c = v->crc32c;
    out.push_back(info);
  }
  if (!it->status().ok()) {
    return Status::IoError("scanning chunk index of " + dir_ + ": " +
                           RocksMessage(it->status()));
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
  c.missing_chunks = missing_.load();
  c.malformed_entries = malformed_.load();
  c.nospace_refusals = nospace_.load();
  c.orphans_removed = orphans_.load();
  c.temp_files_removed = temps_.load();
  c.clones_shared = clones_.load();
  c.commit_batches = batches_.load();
  c.committed_ops = ops_.load();
  c.data_syncs = data_syncs_.load();
  c.index_syncs = index_syncs_.load();
  c.data_writes = data_writes_.load();
  c.buffered_writes = buffered_writes_.load();
  c.data_write_ns = data_write_ns_.load();
  c.queue_ns = queue_ns_.load();
  c.commit_wait_ns = commit_wait_ns_.load();
  c.batch_ns = batch_ns_.load();
  c.data_sync_ns = data_sync_ns_.load();
  c.index_sync_ns = index_sync_ns_.load();
  c.pending_records = pending_records_;
  c.pending_verified = pending_verified_;
  c.pending_rolled_back = pending_rolled_back_;
  c.holes_punched = holes_.load();
  c.chunks_relocated = relocated_.load();
  c.patches_in_place = patches_in_place_.load();
  c.patches_whole = patches_whole_.load();
  c.bytes_written = bytes_written_.load();
  c.segments_removed = segments_ ? segments_->removed() : 0;
  c.segments_from_spares = segments_ ? segments_->rolled_onto_spares() : 0;
  c.spares_filled = segments_ ? segments_->spares_filled() : 0;
  c.direct_read_bytes = direct_read_bytes_.load();
  c.read_batches = read_batches_.load();
  c.batched_ops = batched_ops_.load();
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
