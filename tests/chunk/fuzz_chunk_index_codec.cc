// libFuzzer target for the chunk index decoders (keys, values and pending
// records read back from RocksDB): no crash on any input, and whatever decodes
// re-encodes to exactly the same bytes, with the bounds the engine relies on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/chunk/chunk_index_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stripefs;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ChunkId id;
  uint64_t version = 0;
  if (DecodeChunkKey(in, &id, &version).ok()) {
    if (EncodeChunkKey(id, version) != in) std::abort();
    if (EncodeChunkIdPrefix(id) != in.substr(0, kChunkIdPrefixSize)) {
      std::abort();
    }
    (void)DescribeChunk(id, version);
  }
  auto value = DecodeChunkValue(in);
  if (value.ok()) {
    if (EncodeChunkValue(*value) != in) std::abort();
    // What the engine relies on without checking again: an aligned extent
    // that does not wrap, and one CRC per block.
    // Pieces: in chunk order, covering [0, length) exactly, aligned, not
    // wrapping, none empty.
    if (value->in_segment) {
      if (value->block_shift == 0) std::abort();
      uint64_t next = 0;
      for (const ChunkPiece& p : value->pieces) {
        if (p.chunk_offset != next || p.length == 0 ||
            p.chunk_offset % kSegmentAlign != 0 ||
            p.segment_offset % kSegmentAlign != 0 ||
            p.segment_offset + SegmentExtentBytes(p.length) <
                p.segment_offset) {
          std::abort();
        }
        next += p.length;
      }
      if (next != value->length) std::abort();
      // Reads exactly the CRCs decoded (bounds, under ASan).
      (void)CombineBlockCrcs(value->block_crcs, value->length,
                             value->block_shift);
    }
    if (value->block_shift != 0 &&
        value->block_crcs.size() != (uint64_t{value->length} +
                                     (uint64_t{1} << value->block_shift) - 1) >>
                                        value->block_shift) {
      std::abort();
    }
  }
  uint64_t batch = 0;
  if (DecodePendingKey(in, &batch).ok() && EncodePendingKey(batch) != in) {
    std::abort();
  }
  auto pending = DecodePendingRecord(in);
  if (pending.ok()) {
    if (EncodePendingRecord(*pending) != in) std::abort();
    for (const PendingEntry& e : *pending) {
      // What RecoverPending relies on: a non-empty, aligned piece that does
      // not wrap.
      if (e.piece.length == 0 || e.piece.chunk_offset % kSegmentAlign != 0 ||
          e.piece.segment_offset % kSegmentAlign != 0 ||
          e.piece.segment_offset + SegmentExtentBytes(e.piece.length) <
              e.piece.segment_offset) {
        std::abort();
      }
    }
  }
  return 0;
}
