// Opening a chunk store: the directory layout and its checks, sizing from
// the file system, the index and segments, and crash recovery (pending
// records); see "Crash rules" in chunk_store.h.
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

#include "backend/chunk/chunk_index.h"
#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/live_space.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"
#include "common/coding.h"
#include "common/durable_dirs.h"
#include "common/rocks_glue.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {

using chunk_paths::Log;

namespace {

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

// The store's directory, trailing slashes dropped: created when missing
// (with options.create_if_missing), else checked to be a writable directory.
Result<std::string> CheckStoreDir(const std::string& dir_in,
                                  const ChunkStoreOptions& options) {
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
    // Durable in its parent too: Open syncs only what is inside.
    STRIPEFS_RETURN_IF_ERROR(MakeDirsDurably(dir, "chunk store directory"));
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
  return dir;
}

// What `dir` holds: a chunk store (*has_marker; *legacy for the
// one-file-per-version layout) whose index is there, or nothing foreign
// (a new store, with options.create_if_missing).
Status CheckLayout(const std::string& dir, const ChunkStoreOptions& options,
                   bool* has_marker, bool* legacy) {
  const std::string marker = dir + "/" + chunk_paths::kMarkerName;
  *has_marker = ::access(marker.c_str(), F_OK) == 0;
  if (!*has_marker) {
    STRIPEFS_RETURN_IF_ERROR(CheckForeign(dir));
    if (!options.create_if_missing) {
      return Status::NotFound(dir + " is not a chunk store (no " +
                              chunk_paths::kMarkerName +
                              " marker); check the path");
    }
    return Status::Ok();
  }
  STRIPEFS_RETURN_IF_ERROR(CheckMarker(dir, legacy));
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
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ChunkStore>> ChunkStore::Open(
    const std::string& dir_in, const ChunkStoreOptions& options) {
  STRIPEFS_ASSIGN_OR_RETURN(const std::string dir,
                            CheckStoreDir(dir_in, options));
  bool has_marker = false;
  bool legacy = false;
  STRIPEFS_RETURN_IF_ERROR(CheckLayout(dir, options, &has_marker, &legacy));
  std::unique_ptr<ChunkStore> store(new ChunkStore(dir, options));
  // A legacy store becomes a segment store that still reads its old files;
  // an older build then refuses it (unknown marker) instead of misreading.
  STRIPEFS_RETURN_IF_ERROR(store->PrepareLayout(!has_marker || legacy));
  STRIPEFS_RETURN_IF_ERROR(store->OpenData());
  if (options.sweep_on_open) STRIPEFS_RETURN_IF_ERROR(store->SweepAtOpen());
  std::map<uint64_t, SegmentUsage> usage;
  STRIPEFS_RETURN_IF_ERROR(store->RecountFromIndex(&usage));
  store->StartThreads();
  return store;
}

Status ChunkStore::PrepareLayout(bool write_marker) {
  STRIPEFS_ASSIGN_OR_RETURN(lock_fd_, TakeLock(dir_));
  for (const std::string& sub : {dir_ + "/" + chunk_paths::kSegmentsName,
                                 dir_ + "/" + chunk_paths::kIndexName}) {
    if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(errno, "cannot create " + sub);
    }
  }
  STRIPEFS_RETURN_IF_ERROR(chunk_paths::FsyncDir(dir_));
  STRIPEFS_RETURN_IF_ERROR(OpenIndex());
  if (write_marker) STRIPEFS_RETURN_IF_ERROR(WriteMarker(dir_));
  return Status::Ok();
}

Status ChunkStore::OpenData() {
  struct statvfs vfs;
  if (::statvfs(dir_.c_str(), &vfs) != 0)
    return Status::FromErrno(errno, "statvfs " + dir_);
  const uint64_t capacity =
      static_cast<uint64_t>(vfs.f_blocks) * static_cast<uint64_t>(vfs.f_frsize);
  reserve_bytes_ = options_.reserve_bytes == kScaledReserve
                       ? ScaledChunkReserve(capacity)
                       : options_.reserve_bytes;
  io_ = std::make_unique<UringFileIo>(options_.use_io_uring, dir_);
  SegmentSet::Options so;
  so.segment_bytes = ScaledSegmentBytes(options_.segment_bytes, capacity);
  so.use_direct_io = options_.use_direct_io;
  // A small file system keeps its space for chunks.
  if (capacity / so.segment_bytes >= kMinSegmentsForSpares) {
    so.spare_segments = options_.spare_segments;
    so.spare_min_free_bytes = reserve_bytes_ + 16 * so.segment_bytes;
  }
  segments_ =
      std::make_unique<SegmentSet>(dir_ + "/" + chunk_paths::kSegmentsName, so);
  STRIPEFS_RETURN_IF_ERROR(OpenSegments());
  segments_->StartFiller();
  reserve_fd_.Reset(
      ::open((dir_ + "/" + chunk_paths::kIndexReserveName).c_str(),
             O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  RestoreIndexReserve();
  return Status::Ok();
}

Status ChunkStore::SweepAtOpen() {
  auto rep = Sweep();
  if (!rep.ok()) return rep.status().Annotate("sweep of " + dir_);
  const SweepReport& r = *rep;
  if (r.temp_files_removed || r.orphans_removed || r.missing_dropped ||
      r.unknown_files) {
    Log(dir_,
        "open: removed %" PRIu64 " temp files and %" PRIu64
        " orphan chunk files, dropped %" PRIu64
        " index entries whose data is missing, left %" PRIu64
        " unknown files in data/",
        r.temp_files_removed, r.orphans_removed, r.missing_dropped,
        r.unknown_files);
  }
  return Status::Ok();
}

void ChunkStore::StartThreads() {
  committer_ = std::thread([this] { CommitLoop(); });
  indexer_ = std::thread([this] { IndexLoop(); });
  if (options_.compact_bytes_per_sec > 0) {
    compactor_ = std::thread([this] { CompactLoop(); });
  }
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
        ++counters_.malformed_entries;
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
      ++counters_.pending_verified;
      continue;
    }
    // Only "the bytes are not there" rolls back; an I/O error leaves the
    // decision to the next open.
    if (rs.code() != EBADMSG && rs.code() != ENOENT) {
      return rs.Annotate("verifying an unconfirmed write at open");
    }
    ++counters_.pending_rolled_back;
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
    counters_.data_syncs.fetch_add(1, std::memory_order_relaxed);
  }
  STRIPEFS_RETURN_IF_ERROR(IndexWrite([&](rocksdb::WriteBatch* b) {
    for (const std::string& k : keys) b->Delete(k);
  }));
  for (const auto& [seq, u] : held) {
    segments_->RemoveLive(seq, u.live_bytes, u.live_entries);
  }
  counters_.pending_records = keys.size();
  Log(dir_,
      "open: %zu pending records: %" PRIu64
      " unconfirmed writes verified, %" PRIu64
      " rolled back (their bytes had not reached the disk)",
      keys.size(), counters_.pending_verified.load(),
      counters_.pending_rolled_back.load());
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
    live_space::UniqueSegmentBytes(ptrs, &per_segment);
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
  counters_.malformed_entries = malformed;
  return Status::Ok();
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

}  // namespace stripefs
