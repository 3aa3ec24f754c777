// The chunk store's RocksDB index, as the chunk store's .cc files use it
// (private to backend/chunk/; the ChunkStore members that own the index,
// GetEntry, VersionsOf, ScanIndex, IndexWrite, ..., are in chunk_index.cc).
//
// The index is the truth (see "Crash rules" in chunk_store.h): it maps
// (chunk id, version) to the pieces and CRCs of chunk_index_codec.h. The
// version cache (chunk_version_cache.h) in front of it is exact: every
// index write either updates the entries it changes (the group commit,
// under each op's chunk lock) or drops them (IndexWrite).
//
// Thread-safety: a lookup or scan of a chunk id's entries holds that id's
// chunk lock (shared or exclusive); RocksDB serializes the rest. PrefixScan
// is one thread's iterator.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/coding.h"

namespace stripefs {

inline std::string RocksMessage(const rocksdb::Status& s) {
  return s.ToString();
}

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

}  // namespace stripefs
