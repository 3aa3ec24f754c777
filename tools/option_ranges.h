// Ranges of the CLI's numeric options that are not mount options (those
// live with MountService in fs/mount_service.h, which checks
// them again). Every numeric option gets ->check(InRange(...)): a value
// outside is a one-line parse error that names the range.
#pragma once

#include <CLI/CLI.hpp>

#include "fs/mount_service.h"

namespace stripefs::tools {

inline CLI::Range InRange(fs::OptionRange r) {
  return CLI::Range(r.min, r.max);
}

inline constexpr fs::OptionRange kTimeoutSecondsRange{1, 3600};
inline constexpr fs::OptionRange kGraceSecondsRange{0, 3600};
inline constexpr fs::OptionRange kServersRange{1, 256};    // local cluster
inline constexpr fs::OptionRange kEtcdMembersRange{1, 7};  // local cluster
inline constexpr fs::OptionRange kMetadsRange{1, 16};      // local cluster
inline constexpr fs::OptionRange kEtcdTimeoutMsRange{100, 3'600'000};
inline constexpr fs::OptionRange kPortRange{0, 65535};
inline constexpr fs::OptionRange kServerIdRange{0, 1 << 20};
inline constexpr fs::OptionRange kSignalRange{1, 64};
inline constexpr fs::OptionRange kProbeMsRange{1, 3'600'000};
inline constexpr fs::OptionRange kProbeCountRange{1, 1000};
inline constexpr fs::OptionRange kRepairParallelRange{1, 256};
inline constexpr fs::OptionRange kNamespaceSyncMsRange{0, 1000};

}  // namespace stripefs::tools
