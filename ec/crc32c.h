// CRC32C (Castagnoli), the checksum of every stored chunk and wire frame,
// computed with ISA-L's crc32_iscsi. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stripefs::ec {

// Standard CRC32C of `len` bytes: Crc32c("123456789") == 0xE3069283.
// Chain pieces by passing the previous result as `crc`.
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0);

}  // namespace stripefs::ec
