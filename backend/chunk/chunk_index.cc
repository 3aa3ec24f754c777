// The chunk store's index: entry lookups, version scans and the version
// cache, index writes outside the group commit, listing (see chunk_index.h).
#include "backend/chunk/chunk_index.h"

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

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/chunk_version_cache.h"
#include "backend/chunk/group_commit.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"
#include "common/coding.h"
#include "common/rocks_glue.h"
#include "common/unique_fd.h"
#include "ec/crc32c.h"

namespace stripefs {

namespace {

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

}  // namespace

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
    counters_.malformed_entries.fetch_add(1, std::memory_order_relaxed);
    return dv.status().Annotate("index entry of " + DescribeChunk(id, version) +
                                " in " + dir_);
  }
  *found = true;
  *v = std::move(*dv);
  return Status::Ok();
}

Status ChunkStore::IndexWrite(
    const std::function<void(rocksdb::WriteBatch*)>& fill) {
  rocksdb::WriteBatch batch;
  fill(&batch);
  const auto start = std::chrono::steady_clock::now();
  Status st = RocksWriteSynced(db_.get(), &batch, "chunk index of " + dir_);
  counters_.index_sync_ns.fetch_add(NanosSince(start),
                                    std::memory_order_relaxed);
  counters_.index_syncs.fetch_add(1, std::memory_order_relaxed);
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

}  // namespace stripefs
