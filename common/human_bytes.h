// HumanBytes: a byte count as the largest exact binary unit ("4 MiB",
// "256 KiB", "1000 B"), for messages and `stripefs` output.
#pragma once

#include <cstdint>
#include <string>

namespace stripefs {

inline std::string HumanBytes(uint64_t b) {
  struct Unit {
    int shift;
    const char* name;
  };
  for (Unit u : {Unit{30, " GiB"}, Unit{20, " MiB"}, Unit{10, " KiB"}}) {
    const uint64_t one = uint64_t{1} << u.shift;
    if (b >= one && b % one == 0) return std::to_string(b >> u.shift) + u.name;
  }
  return std::to_string(b) + " B";
}

}  // namespace stripefs
