// TCP plumbing for the RPC layer: an owning fd, "host:port" parsing, and
// non-blocking connect/listen on IPv4.
//
// Addresses are "HOST:PORT" (HOST a dotted IPv4 address or a name resolved
// to IPv4) or a bare "PORT" meaning 127.0.0.1:PORT (loopback by default).
// Sockets are returned non-blocking and close-on-exec, TCP_NODELAY set.
// Free functions, thread-safe; UniqueFd is a move-only owner.
#pragma once

#include <string>
#include <utility>

#include "backend/rpc/frame.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace stripefs::rpc {

using ::stripefs::UniqueFd;

struct HostPort {
  std::string host;
  uint16_t port = 0;
};
// "h:p" or "p" (-> 127.0.0.1). EINVAL with the offending text otherwise.
Result<HostPort> ParseHostPort(const std::string& address);

Result<UniqueFd> ConnectTcp(const std::string& address, Deadline deadline);
// Binds and listens; *bound gets the actual "ip:port" (port 0 resolved).
Result<UniqueFd> ListenTcp(const std::string& address, std::string* bound);
// "ip:port" of the remote / local end, or "?" when unknown.
std::string PeerAddress(int fd);
std::string LocalAddress(int fd);
// True when a pooled idle connection has been closed or reset by the peer
// (or has unexpected bytes waiting), so it must not be reused.
bool IdleConnectionBroken(int fd);

}  // namespace stripefs::rpc
