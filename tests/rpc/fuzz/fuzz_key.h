// Test-only: the fixed cluster key the fuzz targets and their seed corpus
// use, and the frame ciphers derived from it with fixed nonces (so seed
// frames carry valid tags and the fuzzers reach past the check).
#pragma once

#include <array>
#include <memory>

#include "backend/rpc/cluster_key.h"
#include "tests/rpc/test_sessions.h"

namespace stripefs::rpc {

inline std::shared_ptr<const ClusterKey> FuzzKey() {
  static auto key = stripefs::testing::TestKey(0x5a);
  return key;
}

// A fresh link: tx seals frame 0, 1, ... that rx verifies in order.
inline stripefs::testing::Link FuzzLink() {
  return stripefs::testing::MakeLink(*FuzzKey());
}

// The client nonce the handshake fuzzer uses for AcceptServerHello.
inline Nonce FuzzClientNonce() {
  Nonce n;
  n.fill(0xc1);
  return n;
}

}  // namespace stripefs::rpc
