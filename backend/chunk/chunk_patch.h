// The patch-window arithmetic of PatchChunk and PatchChunkRanges: pure
// functions over chunk offsets, CRC blocks and pieces (no I/O, no state),
// in the style of SeaweedFS's LocateData. ChunkStore::PreparePatch
// (chunk_store_write.cc) reads and writes what these work out.
//
// A patch rounds each range out to CRC blocks and merges windows that
// touch (PatchWindows); the new version keeps the source's pieces outside
// the windows (PiecesOutside) and gets one new piece per window, written
// back to back in one extent (ScatterIntoWindows places the ranges' bytes
// there; BytesPerBlock says which blocks the ranges cover only in part, so
// only those are read from the source).
//
// Limits: ranges sorted, disjoint, non-empty and inside the chunk
// (CheckPatchRanges in chunk_service.h); `block` a power of two.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_service.h"

namespace stripefs::chunk_patch {

// A patch's windows: each range rounded out to `block`s (at most to the
// chunk's end), windows that touch merged. Ranges are sorted and disjoint.
std::vector<PatchRange> PatchWindows(std::span<const PatchRange> ranges,
                                     uint64_t block, uint32_t length);

// `pieces` without the chunk bytes `windows` cover (both sorted).
std::vector<ChunkPiece> PiecesOutside(const std::vector<ChunkPiece>& pieces,
                                      const std::vector<PatchRange>& windows);

// Per block of `windows` (back to back, as PatchWindows made them from
// `ranges`): how many of its bytes the ranges cover.
std::vector<uint32_t> BytesPerBlock(std::span<const PatchRange> ranges,
                                    const std::vector<PatchRange>& windows,
                                    uint64_t block);

// Copies each range's bytes (`bytes`, range order) to its place in `out`,
// which holds `windows` back to back.
void ScatterIntoWindows(std::span<const PatchRange> ranges,
                        std::span<const uint8_t> bytes,
                        const std::vector<PatchRange>& windows, uint8_t* out);

}  // namespace stripefs::chunk_patch
