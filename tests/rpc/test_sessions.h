// Test-only: the rpc tests' cluster keys (TestKey: every byte `fill`, so
// different fills are different clusters) and matched frame ciphers without
// a socket. A Link is one direction of a session: `tx` seals what `rx`
// verifies (client send and server receive of the same derived session).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/session.h"

namespace stripefs::testing {

using namespace ::stripefs::rpc;  // test helpers of the rpc layer

inline std::shared_ptr<const ClusterKey> TestKey(uint8_t fill) {
  std::array<uint8_t, kClusterKeySize> b;
  b.fill(fill);
  return ClusterKey::FromBytes(b);
}

struct Link {
  FrameCipher tx;
  FrameCipher rx;
};

// Deterministic nonces from `seed`: the same seed gives the same keys, a
// different seed stands for another connection.
inline Link MakeLink(const ClusterKey& key, uint8_t seed = 1) {
  std::array<uint8_t, 8> c, s;  // stand-ins for the two hello messages
  c.fill(seed);
  s.fill(static_cast<uint8_t>(seed ^ 0xA5));
  Session client = DeriveSession(key, Role::kClient, c, s);
  Session server = DeriveSession(key, Role::kServer, c, s);
  return {std::move(client.send), std::move(server.recv)};
}

}  // namespace stripefs::testing
