// Test-only: the fixed cluster key the fuzz targets and their seed corpus
// use, and the frame ciphers derived from it with fixed nonces (so seed
// frames carry valid tags and the fuzzers reach past the check).
#pragma once

#include <array>
#include <memory>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/handshake.h"
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

// The ClientHello (fuzz key's identity, fixed nonce) the handshake fuzzer
// answers with AcceptServerHello.
inline std::array<uint8_t, kClientHelloSize> FuzzClientHello() {
  Nonce n;
  n.fill(0xc1);
  std::array<uint8_t, kClientHelloSize> hello;
  EncodeClientHello(*FuzzKey(), n, hello.data());
  return hello;
}

}  // namespace stripefs::rpc
