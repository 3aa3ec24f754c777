#include "backend/chunk/chunk_patch.h"

#include <algorithm>
#include <cstring>

namespace stripefs::chunk_patch {

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

}  // namespace stripefs::chunk_patch
