// A deliberately slow, independent GF(2^8) Reed-Solomon reference (no ISA-L)
// used to check the Codec's output byte for byte. Test-only.
#pragma once

#include <cstdint>
#include <vector>

namespace stripefs::ec::testing {

// Multiplication in GF(2^8) modulo x^8+x^4+x^3+x^2+1 (0x11d), bit by bit.
inline uint8_t GfMul(uint8_t a, uint8_t b) {
  uint8_t p = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) p ^= a;
    bool carry = a & 0x80;
    a = static_cast<uint8_t>(a << 1);
    if (carry) a ^= 0x1d;
    b >>= 1;
  }
  return p;
}

// a^-1 = a^254 (the multiplicative group has order 255).
inline uint8_t GfInv(uint8_t a) {
  uint8_t r = 1;
  for (int i = 0; i < 254; ++i) r = GfMul(r, a);
  return r;
}

// Systematic Cauchy generator: identity on top, then 1 / (i xor j).
inline std::vector<uint8_t> CauchyMatrix(int k, int m) {
  std::vector<uint8_t> a(static_cast<size_t>((k + m) * k), 0);
  for (int i = 0; i < k; ++i) a[static_cast<size_t>(i * k + i)] = 1;
  for (int i = k; i < k + m; ++i)
    for (int j = 0; j < k; ++j)
      a[static_cast<size_t>(i * k + j)] = GfInv(static_cast<uint8_t>(i ^ j));
  return a;
}

// parity[p][b] = sum_j G[k+p][j] * data[j][b]
inline std::vector<std::vector<uint8_t>> ReferenceEncode(
    int k, int m, const std::vector<std::vector<uint8_t>>& data) {
  auto g = CauchyMatrix(k, m);
  size_t len = data[0].size();
  std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(m),
                                           std::vector<uint8_t>(len, 0));
  for (int p = 0; p < m; ++p)
    for (int j = 0; j < k; ++j) {
      uint8_t c = g[static_cast<size_t>((k + p) * k + j)];
      for (size_t b = 0; b < len; ++b)
        parity[static_cast<size_t>(p)][b] ^=
            GfMul(c, data[static_cast<size_t>(j)][b]);
    }
  return parity;
}

}  // namespace stripefs::ec::testing
