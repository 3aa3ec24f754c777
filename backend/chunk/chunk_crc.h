// ChunkCrc32c: the CRC32C (Castagnoli) checksum the chunk store keeps per
// chunk, computed with ISA-L's crc32_iscsi.
//
// Temporary module-internal helper: ec/ will expose a shared Crc32c later; the
// two must agree (standard CRC32C, check value CRC32C("123456789") =
// 0xE3069283) and this one should then be replaced by it.
// Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace stripefs {

// Standard CRC32C of `data` (init 0xFFFFFFFF, reflected, final xor).
uint32_t ChunkCrc32c(std::span<const uint8_t> data);

}  // namespace stripefs
