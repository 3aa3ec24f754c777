// The files OrphanPurgeCrashTest's child writes in round `r`, shared by the
// child (which writes them) and the test (which checks them).
#pragma once

#include <cstdint>
#include <string>

#include "backend/meta/meta_types.h"

namespace stripefs::testing {

inline const Geometry kPurgeGeometry{4, 2, 4096};
inline constexpr int kDeadPerRound = 24;
// Bytes of round r's live file: 3 1/2 stripes.
inline constexpr uint64_t kLiveBytes = 7 * 8192;
// Bytes of each unlinked file: 2 1/2 stripes.
inline constexpr uint64_t kDeadBytes = 5 * 8192;

inline std::string LiveName(int round) {
  return "live-" + std::to_string(round);
}
inline std::string DeadName(int round, int i) {
  return "dead-" + std::to_string(round) + "-" + std::to_string(i);
}
inline uint32_t LiveSeed(int round) { return 1000u + round; }

}  // namespace stripefs::testing
