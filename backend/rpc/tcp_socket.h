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

namespace stripefs::rpc {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) Reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

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
