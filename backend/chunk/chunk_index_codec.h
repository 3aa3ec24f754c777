// ChunkIndexCodec: the byte format of the chunk store's RocksDB index.
//
// Key   = 'c' | inode u64 | stripe u64 | index u32 | version u64  (29 bytes,
//         big-endian, so RocksDB's bytewise order is (inode, stripe, index,
//         version) order).
// Value = format u8 | length u32 | crc32c u32 | flags u32, big-endian, then
//         format 1: nothing (13 bytes; one CRC for the whole chunk), or
//         format 2: block_shift u8 | one crc32c u32 per 2^block_shift-byte
//                   block of the data (the last one may be short), so a range
//                   read verifies only the blocks it covers.
//         Formats 1 and 2 describe a chunk in its own file (the layout of
//         stores written before segments, still read).
//         format 3: block_shift u8 | segment u64 | offset u64 | block CRCs
//                   as in format 2: the chunk's bytes are at `offset` of
//                   segment file `segment` (offset a multiple of
//                   kSegmentAlign; the extent is `length` rounded up to it).
//         format 4: block_shift u8 | pieces u32 | per piece: chunk offset
//                   u32 | length u32 | segment u64 | segment offset u64 |
//                   block CRCs as in format 2: the chunk is made of pieces
//                   (extents of segments, possibly shared with other
//                   versions of the same chunk id), in chunk order, that
//                   cover [0, length) exactly; every piece starts at a
//                   multiple of kSegmentAlign in the chunk and in its
//                   segment, and occupies its length rounded up to
//                   kSegmentAlign there. Written by PatchChunk (and clones
//                   of patched versions); a chunk that is one piece is
//                   written as format 3, which is what the encoder emits
//                   for it (the decoder refuses format 4 for it, so that
//                   every value has one encoding).
// Pending records (one per group commit that wrote new bytes; see
// chunk_store.h, "Crash rules"): the batch's index entries are synced at the
// same time as its segment bytes, so until the batch's data sync is known to
// have completed, a record names what to verify at open.
// Key   = 'p' | batch u64 (9 bytes, big-endian; after every 'c' key).
// Value = format u8 (1) | entries u32 | per entry: chunk key (29 bytes, as
//         above) | the piece the batch wrote: chunk offset u32 | length u32
//         | segment u64 | segment offset u64 (aligned, non-empty, not
//         wrapping) | old u32 (0: the key had no entry before; else the
//         byte length of the entry it replaced, whose encoded value follows).
// Decoders are bounds-checked and return Corruption for anything malformed.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "common/status.h"

namespace stripefs {

inline constexpr char kChunkKeyPrefix = 'c';
inline constexpr size_t kChunkKeySize = 1 + 8 + 8 + 4 + 8;
inline constexpr char kPendingKeyPrefix = 'p';
inline constexpr size_t kPendingKeySize = 1 + 8;
inline constexpr uint8_t kPendingRecordFormat = 1;
// Fixed bytes of one pending entry (before its old value).
inline constexpr size_t kPendingEntryFixedSize =
    kChunkKeySize + 4 + 4 + 8 + 8 + 4;
// Prefix of all versions of one chunk id: 'c' | inode | stripe | index.
inline constexpr size_t kChunkIdPrefixSize = 1 + 8 + 8 + 4;
inline constexpr uint8_t kChunkValueFormatWhole = 1;
inline constexpr uint8_t kChunkValueFormatBlocks = 2;
inline constexpr uint8_t kChunkValueFormatSegment = 3;
inline constexpr uint8_t kChunkValueFormatPieces = 4;
inline constexpr size_t kChunkValueSize = 1 + 4 + 4 + 4;  // format 1
inline constexpr size_t kChunkSegmentRefSize = 8 + 8;     // format 3
inline constexpr size_t kChunkPieceSize = 4 + 4 + 8 + 8;  // format 4
// Block CRCs cover 4 KiB each (a page: the unit of small reads).
inline constexpr uint8_t kChunkCrcBlockShift = 12;
inline constexpr uint8_t kChunkCrcBlockShiftMin = 9;
inline constexpr uint8_t kChunkCrcBlockShiftMax = 24;
// Extents in segment files start on (and are padded to) this boundary, the
// O_DIRECT unit.
inline constexpr uint64_t kSegmentAlign = 4096;

// `length` bytes of a chunk from chunk offset `chunk_offset` are at
// `segment_offset` of segment `segment`.
struct ChunkPiece {
  uint32_t chunk_offset = 0;
  uint32_t length = 0;
  uint64_t segment = 0;
  uint64_t segment_offset = 0;

  friend bool operator==(const ChunkPiece&, const ChunkPiece&) = default;
};

struct ChunkIndexValue {
  uint32_t length = 0;
  uint32_t crc32c = 0;  // of the whole chunk (scrub, ListChunks)
  uint32_t flags = 0;   // reserved, 0 today
  // 0 with no block CRCs (format 1); else log2 of the block size, and
  // block_crcs holds ceil(length / 2^block_shift) CRCs (format 2).
  uint8_t block_shift = 0;
  std::vector<uint32_t> block_crcs;
  // Formats 3 and 4: where the bytes are, in chunk order (else the chunk
  // has its own file). Empty for an empty chunk.
  bool in_segment = false;
  std::vector<ChunkPiece> pieces = {};
};

// Bytes a chunk of `length` occupies in a segment.
inline uint64_t SegmentExtentBytes(uint64_t length) {
  return (length + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign;
}

// The block CRCs of `data` for ChunkIndexValue::block_crcs. With `whole`,
// also the CRC32C of all of `data`, combined from the block CRCs (one pass
// over the bytes instead of two).
std::vector<uint32_t> ComputeBlockCrcs(const uint8_t* data, size_t len,
                                       uint8_t block_shift,
                                       uint32_t* whole = nullptr);

// The CRC32C of a whole `length`-byte chunk from its block CRCs (as
// ComputeBlockCrcs would give with `whole`), without touching the bytes.
uint32_t CombineBlockCrcs(const std::vector<uint32_t>& crcs, uint64_t length,
                          uint8_t block_shift);

std::string EncodeChunkKey(const ChunkId& id, uint64_t version);
// The first kChunkIdPrefixSize bytes of every key of `id`.
std::string EncodeChunkIdPrefix(const ChunkId& id);
// Decodes a key into (id, version); Corruption if malformed.
Status DecodeChunkKey(std::string_view key, ChunkId* id, uint64_t* version);

std::string EncodeChunkValue(const ChunkIndexValue& v);
Result<ChunkIndexValue> DecodeChunkValue(std::string_view value);

// One entry of a pending record: (id, version) got `piece` (new bytes) in
// an unconfirmed batch; `old` is the entry it replaced, if any.
struct PendingEntry {
  ChunkId id;
  uint64_t version = 0;
  ChunkPiece piece;
  bool has_old = false;
  ChunkIndexValue old;
};

std::string EncodePendingKey(uint64_t batch);
Status DecodePendingKey(std::string_view key, uint64_t* batch);
std::string EncodePendingRecord(const std::vector<PendingEntry>& entries);
Result<std::vector<PendingEntry>> DecodePendingRecord(std::string_view value);

// "inode 0x.. stripe N index I version 0x..": how messages name a chunk.
std::string DescribeChunk(const ChunkId& id, uint64_t version);

}  // namespace stripefs
