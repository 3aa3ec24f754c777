// ChunkStore::Sweep: garbage left by crashes and by the legacy layout.
//
// Segments need little: bytes no entry points to are cut off at open and
// unused segments are removed. The one-file-per-version layout of older
// stores needs the file walk below: temp files, data files without an index
// entry (orphans), index entries without their file (missing chunks), and
// empty directories.
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <shared_mutex>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"

namespace stripefs {

using chunk_paths::ListDir;
using chunk_paths::ParseHex64;

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

Result<SweepReport> ChunkStore::Sweep() {
  SweepReport rep;
  rep.segments_removed = segments_->RemoveDead();
  // 1. tmp/: nothing writes temp files any more; all of them are leftovers.
  STRIPEFS_RETURN_IF_ERROR(SweepTmp(&rep));
  // 2. data/: files without a legacy index entry are orphans.
  std::vector<std::string> bucket_paths;
  std::vector<std::string> inode_paths;
  STRIPEFS_RETURN_IF_ERROR(SweepLegacyData(&rep, &bucket_paths, &inode_paths));
  // 3. Legacy index entries whose file is gone.
  STRIPEFS_RETURN_IF_ERROR(DropMissingLegacy(&rep));
  // 4. Empty legacy directories (nothing creates them any more).
  for (const auto& b : bucket_paths) {
    if (::rmdir(b.c_str()) == 0) ++rep.empty_dirs_removed;
  }
  for (const auto& p : inode_paths) {
    if (::rmdir(p.c_str()) == 0) ++rep.empty_dirs_removed;
  }

  counters_.orphans_removed.fetch_add(rep.orphans_removed,
                                      std::memory_order_relaxed);
  counters_.temp_files_removed.fetch_add(rep.temp_files_removed,
                                         std::memory_order_relaxed);
  return rep;
}

Status ChunkStore::SweepTmp(SweepReport* rep) {
  if (!Exists(tmp_dir_)) return Status::Ok();
  STRIPEFS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(tmp_dir_));
  for (const auto& n : names) {
    std::string p = tmp_dir_ + "/" + n;
    if (::unlink(p.c_str()) == 0) ++rep->temp_files_removed;
  }
  return Status::Ok();
}

Status ChunkStore::SweepLegacyData(SweepReport* rep,
                                   std::vector<std::string>* bucket_paths,
                                   std::vector<std::string>* inode_paths) {
  std::vector<std::string> inode_dirs;
  if (Exists(data_dir_)) {
    STRIPEFS_ASSIGN_OR_RETURN(inode_dirs, ListDir(data_dir_));
  }
  for (const auto& idir : inode_dirs) {
    uint64_t inode;
    std::string ipath = data_dir_ + "/" + idir;
    if (idir.size() != 16 || !ParseHex64(idir, &inode)) {
      ++rep->unknown_files;
      continue;
    }
    inode_paths->push_back(ipath);
    auto buckets = ListDir(ipath);
    if (!buckets.ok()) {
      ++rep->unknown_files;  // e.g. a stray file named like an inode
      continue;
    }
    for (const auto& b : *buckets) {
      uint64_t bucket;
      std::string bpath = ipath + "/" + b;
      if (!ParseHex64(b, &bucket)) {
        ++rep->unknown_files;
        continue;
      }
      bucket_paths->push_back(bpath);
      STRIPEFS_RETURN_IF_ERROR(SweepLegacyBucket(inode, bucket, bpath, rep));
    }
  }
  return Status::Ok();
}

Status ChunkStore::SweepLegacyBucket(uint64_t inode, uint64_t bucket,
                                     const std::string& bpath,
                                     SweepReport* rep) {
  auto files = ListDir(bpath);
  if (!files.ok()) {
    ++rep->unknown_files;
    return Status::Ok();
  }
  for (const auto& f : *files) {
    ChunkId id;
    uint64_t version;
    id.inode = inode;
    if (!chunk_paths::ParseLegacyChunkFileName(f, &id.stripe, &id.index,
                                               &version) ||
        (id.stripe >> chunk_paths::kStripeBucketShift) != bucket) {
      ++rep->unknown_files;
      continue;
    }
    std::unique_lock<std::shared_mutex> lock(LockFor(id));
    bool found = false;
    ChunkIndexValue v;
    Status gs = GetEntry(id, version, &found, &v);
    if (!gs.ok() && gs.code() != EBADMSG) return gs;
    // Orphan: no entry, or one that now points into a segment.
    if (gs.ok() && (!found || v.in_segment)) {
      std::string p = bpath + "/" + f;
      if (::unlink(p.c_str()) == 0) ++rep->orphans_removed;
    }
  }
  return Status::Ok();
}

Status ChunkStore::DropMissingLegacy(SweepReport* rep) {
  std::vector<std::pair<ChunkId, uint64_t>> missing;
  STRIPEFS_RETURN_IF_ERROR(ScanIndex([&](const ChunkId& id, uint64_t version,
                                         const ChunkIndexValue* v) {
    if (v == nullptr || v->in_segment) return;
    if (::access(chunk_paths::LegacyChunkPath(data_dir_, id, version).c_str(),
                 F_OK) != 0 &&
        errno == ENOENT) {
      missing.emplace_back(id, version);
    }
  }));
  for (const auto& [id, version] : missing) {
    std::unique_lock<std::shared_mutex> lock(LockFor(id));
    bool found = false;
    ChunkIndexValue v;
    if (!GetEntry(id, version, &found, &v).ok() || !found || v.in_segment) {
      continue;
    }
    if (Exists(chunk_paths::LegacyChunkPath(data_dir_, id, version))) continue;
    NoteMissing(id, version);
    STRIPEFS_RETURN_IF_ERROR(DropEntry(id, version));
    ++rep->missing_dropped;
  }
  return Status::Ok();
}

}  // namespace stripefs
