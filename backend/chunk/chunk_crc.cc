#include "backend/chunk/chunk_crc.h"

#include <isa-l/crc.h>

namespace stripefs {

uint32_t ChunkCrc32c(std::span<const uint8_t> data) {
  // crc32_iscsi takes the running (inverted) register as seed and does not
  // invert the result, so the standard CRC32C is seed ~0 and a final xor.
  // crc32_iscsi takes an int length; feed large buffers in pieces.
  uint32_t crc = 0xFFFFFFFFu;
  const uint8_t* p = data.data();
  size_t left = data.size();
  constexpr size_t kStep = size_t{1} << 30;
  while (left > 0) {
    size_t n = left < kStep ? left : kStep;
    crc = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(n), crc);
    p += n;
    left -= n;
  }
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace stripefs
