// Deterministic pseudo-random test payloads: the same (n, seed) always gives
// the same bytes (std::mt19937), so a failing test replays exactly.
// Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stripefs::testing {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed);
// The same bytes as RandomBytes(n, seed), as a string.
std::string RandomString(size_t n, uint32_t seed);

}  // namespace stripefs::testing
