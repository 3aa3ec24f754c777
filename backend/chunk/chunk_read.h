// The chunk store's read path (private to backend/chunk/; the ChunkStore
// members are in chunk_read.cc): a read is planned (PlanRange: which file
// ranges, whole chunk or covered CRC blocks, O_DIRECT or buffered), its
// file reads run, alone or together with a batch's (RunRangeReads: one
// io_uring submission per UringFileIo::kBatchDepth reads), and finished
// (FinishRange: short reads, CRC32C of every block read, the copy out).
//
// Ownership: a RangeRead borrows the caller's index value and output
// buffer (both outlive it) and owns its bounce buffer; each file read holds
// its segment open (shared_ptr), so compaction may remove the segment
// meanwhile. Thread-safety: one RangeRead is one thread's; the caller
// holds the chunk lock of its id (shared) from planning to finishing.
// Limits: a chunk is at most ChunkStoreOptions::max_chunk_bytes; reads of
// at least ChunkStore::kDirectReadMinBytes that are 4 KiB aligned on disk
// and in memory go O_DIRECT.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_store.h"
#include "backend/chunk/uring_file_io.h"
#include "common/buffer_pool.h"

namespace stripefs {

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

}  // namespace stripefs
