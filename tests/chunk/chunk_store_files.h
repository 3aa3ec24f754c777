// Test helpers that write a chunk store's files behind its back: a store as
// the one-file-per-version release laid it out, and raw index values (for
// malformed entries). Names and formats are spelled here, independently of
// the engine's code. Call with the store closed; they ASSERT (check
// HasFatalFailure() after them).
#pragma once

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_store.h"
#include "ec/crc32c.h"
#include "tests/chunk/chunk_payload.h"

namespace stripefs::testing {

// Marker 1, a RocksDB index of format-2 values, and one file per chunk
// version under data/: version 1 of each chunk, Payload(size, id.stripe).
inline void WriteLegacyStore(
    const std::string& dir,
    const std::vector<std::pair<ChunkId, size_t>>& chunks) {
  std::filesystem::create_directories(dir + "/data");
  std::filesystem::create_directories(dir + "/tmp");
  std::ofstream(dir + "/CHUNKSTORE") << "stripefs chunk store 1\n";
  rocksdb::Options opts;
  opts.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(opts, dir + "/index", &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [id, size] : chunks) {
    auto data = Payload(size, id.stripe);
    char sub[128], name[128];
    std::snprintf(sub, sizeof(sub), "/data/%016" PRIx64 "/%" PRIx64, id.inode,
                  id.stripe >> 12);
    std::snprintf(name, sizeof(name), "/%016" PRIx64 ".%u.%016" PRIx64,
                  id.stripe, id.index, uint64_t{1});
    std::filesystem::create_directories(dir + sub);
    std::ofstream(dir + sub + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    ChunkIndexValue v;
    v.length = static_cast<uint32_t>(size);
    v.crc32c = ec::Crc32c(data.data(), size);
    v.block_shift = kChunkCrcBlockShift;
    v.block_crcs = ComputeBlockCrcs(data.data(), size, kChunkCrcBlockShift);
    ASSERT_TRUE(db->Put({}, EncodeChunkKey(id, 1), EncodeChunkValue(v)).ok());
  }
  ASSERT_TRUE(db->Close().ok());
}

// Puts `value` under (id, version) in the index of the store in `dir`.
inline void PutRawIndexValue(const std::string& dir, const ChunkId& id,
                             uint64_t version, const std::string& value) {
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir + "/index", &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  ASSERT_TRUE(db->Put({}, EncodeChunkKey(id, version), value).ok());
  ASSERT_TRUE(db->Close().ok());
}

}  // namespace stripefs::testing
