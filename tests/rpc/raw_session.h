// Test-only: a client connection driven by hand (frames written and read
// by the test, not RpcClient), after the real handshake.
#pragma once

#include <chrono>
#include <string>

#include "backend/rpc/handshake.h"
#include "backend/rpc/tcp_socket.h"

namespace stripefs::testing {

using namespace ::stripefs::rpc;  // test helpers of the rpc layer

struct RawSession {
  UniqueFd fd;
  Session s;
  int get() const { return fd.get(); }
};

inline Deadline TestDeadline() {
  return Clock::now() + std::chrono::seconds(20);
}

// Connects and runs the client handshake.
inline Result<RawSession> OpenRawSession(const std::string& address,
                                         const ClusterKey& key) {
  STRIPEFS_ASSIGN_OR_RETURN(UniqueFd fd, ConnectTcp(address, TestDeadline()));
  STRIPEFS_ASSIGN_OR_RETURN(
      Session s,
      ClientHandshake(fd.get(), key, ServerBinding{}, TestDeadline()));
  return RawSession{std::move(fd), std::move(s)};
}

// Sends one request frame on `c`.
inline Status SendRequest(RawSession& c, uint16_t type, uint64_t id,
                          std::span<const uint8_t> payload,
                          std::span<const uint8_t> bulk = {}) {
  FrameHeader h;
  h.type = type;
  h.request_id = id;
  return WriteFrame(c.get(), c.s.send, h, payload, bulk, TestDeadline());
}

}  // namespace stripefs::testing
