// The workload shared by ChunkStoreCrashTest and its writer process
// (chunk_crash_child): which chunk and size operation n writes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/chunk/chunk_service.h"
#include "tests/chunk/chunk_payload.h"

namespace stripefs::crash {

inline ChunkId IdOf(uint64_t n) {
  return {n % 5 + 1, n, static_cast<uint32_t>(n % 6)};
}
inline size_t SizeOf(uint64_t n) { return 1 + (n * 7919) % (300 << 10); }

// The patch workload (chunk_crash_child THREADS = 0): operation n writes
// version 1 of PatchIdOf(n), patches it to 2, clones 2 to 3, patches 3 to 4
// and deletes 1 (records 'W', '2', '3', '4', 'D'), so versions share pieces
// when the kill lands.
// With THREADS = -1 the same steps go through ApplyChunkOps (and
// DeleteChunkVersions) for kPatchBatch consecutive n at once, each step's
// records after its batch.
inline ChunkId PatchIdOf(uint64_t n) { return {7, n, 1}; }
inline constexpr uint64_t kPatchBatch = 4;
inline size_t PatchSizeOf(uint64_t n) {
  return (64 << 10) + (n * 7919) % (200 << 10);
}
// The ranges that make `version` (2 or 4) from the one before: one window,
// and for version 4 a second one further on when it fits (a version of
// several new pieces, one per range).
inline std::vector<PatchRange> PatchRanges(uint64_t n, uint64_t version) {
  const size_t size = PatchSizeOf(n);
  const auto offset = static_cast<uint32_t>((n * 131 + version * 40999) % size);
  const auto len = static_cast<uint32_t>(
      std::min<size_t>(1 + (n * 17 + version * 29) % 9000, size - offset));
  std::vector<PatchRange> ranges = {{offset, len}};
  const size_t second = size_t{offset} + len + 8192 + (n * 977) % 20000;
  if (version == 4 && second + 3000 <= size) {
    ranges.push_back({static_cast<uint32_t>(second),
                      static_cast<uint32_t>(1 + (n * 31) % 3000)});
  }
  return ranges;
}
inline std::vector<uint8_t> PatchBytes(uint64_t n, uint64_t version) {
  size_t len = 0;
  for (const PatchRange& r : PatchRanges(n, version)) len += r.length;
  return testing::Payload(len, n * 10 + version);
}
// What version `version` (1 to 4) of PatchIdOf(n) holds.
inline std::vector<uint8_t> PatchedContent(uint64_t n, uint64_t version) {
  std::vector<uint8_t> data = testing::Payload(PatchSizeOf(n), n);
  for (uint64_t v : {uint64_t{2}, uint64_t{4}}) {
    if (v > version) break;
    ScatterPatchRanges(PatchRanges(n, v), PatchBytes(n, v), 0, data);
  }
  return data;
}

}  // namespace stripefs::crash
