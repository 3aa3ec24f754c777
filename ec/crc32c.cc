#include "ec/crc32c.h"

#include <isa-l/crc.h>

#include <array>

namespace stripefs::ec {
namespace {

// The reflected CRC32C polynomial; in this bit order x^0 is bit 31.
constexpr uint32_t kPoly = 0x82F63B78u;
constexpr uint32_t kOne = 0x80000000u;  // x^0

// a * b modulo kPoly (both reflected polynomials).
constexpr uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = kOne; m != 0; m >>= 1) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

// kPowers[n] = x^(2^n) mod kPoly, for every bit of 8 * a size_t length.
constexpr size_t kPowerCount = 64 + 3;
constexpr std::array<uint32_t, kPowerCount> MakePowers() {
  std::array<uint32_t, kPowerCount> t{};
  uint32_t p = kOne >> 1;  // x^1
  for (auto& e : t) {
    e = p;
    p = MultModP(p, p);
  }
  return t;
}
constexpr std::array<uint32_t, kPowerCount> kPowers = MakePowers();

}  // namespace

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

uint32_t Crc32cShiftOperator(size_t len) {
  // x^(8*len) = product of x^(2^k) over the set bits k of 8*len; start at
  // k = 3 for the factor 8.
  uint32_t p = kOne;
  for (unsigned k = 3; len != 0; len >>= 1, ++k) {
    if (len & 1) p = MultModP(kPowers[k], p);
  }
  return p;
}

uint32_t Crc32cCombineWith(uint32_t shift, uint32_t crc_a, uint32_t crc_b) {
  // The pre- and post-inversions of the standard CRC cancel out here.
  return MultModP(shift, crc_a) ^ crc_b;
}

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  return Crc32cCombineWith(Crc32cShiftOperator(len_b), crc_a, crc_b);
}

}  // namespace stripefs::ec
