#include "ec/crc32c.h"

#include <isa-l/crc.h>

namespace stripefs::ec {

uint32_t Crc32c(const void* data, size_t len, uint32_t crc) {
  // crc32_iscsi neither pre- nor post-inverts; the standard CRC does both.
  // ISA-L's length parameter is an int: feed huge buffers in pieces.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t state = ~crc;
  while (len > 0) {
    int n = len > (1u << 30) ? (1 << 30) : static_cast<int>(len);
    state = crc32_iscsi(p, n, state);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~state;
}

}  // namespace stripefs::ec
