// Payload(n, seed): deterministic chunk contents for the chunk store tests
// and their helper processes (no gtest dependency).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stripefs::testing {

// Deterministic, seed-dependent payload (a cheap xorshift stream).
inline std::vector<uint8_t> Payload(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

}  // namespace stripefs::testing
