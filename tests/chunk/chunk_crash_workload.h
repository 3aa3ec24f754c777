// The workload shared by ChunkStoreCrashTest and its writer process
// (chunk_crash_child): which chunk and size operation n writes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/chunk/chunk_service.h"

namespace stripefs::crash {

inline ChunkId IdOf(uint64_t n) {
  return {n % 5 + 1, n, static_cast<uint32_t>(n % 6)};
}
inline size_t SizeOf(uint64_t n) { return 1 + (n * 7919) % (300 << 10); }

}  // namespace stripefs::crash
