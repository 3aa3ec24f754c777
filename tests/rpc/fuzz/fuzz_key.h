// Test-only: the fixed cluster key the frame fuzzer and its seed corpus use
// (so seed frames carry valid MACs and the fuzzer reaches past the check).
#pragma once

#include <array>
#include <memory>

#include "backend/rpc/cluster_key.h"

namespace stripefs::rpc {

inline std::shared_ptr<const ClusterKey> FuzzKey() {
  std::array<uint8_t, kClusterKeySize> b;
  b.fill(0x5a);
  static auto key = ClusterKey::FromBytes(b);
  return key;
}

}  // namespace stripefs::rpc
