#include "tests/support/random_bytes.h"

#include <random>

namespace stripefs::testing {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::string RandomString(size_t n, uint32_t seed) {
  std::vector<uint8_t> v = RandomBytes(n, seed);
  return std::string(v.begin(), v.end());
}

}  // namespace stripefs::testing
