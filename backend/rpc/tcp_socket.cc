#include "backend/rpc/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace stripefs::rpc {

Result<HostPort> ParseHostPort(const std::string& address) {
  HostPort hp;
  std::string port_text = address;
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    hp.host = "127.0.0.1";
  } else {
    hp.host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
    if (hp.host.empty()) hp.host = "127.0.0.1";
  }
  unsigned port = 0;
  auto [p, ec] = std::from_chars(port_text.data(),
                                 port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() ||
      p != port_text.data() + port_text.size() || port > 65535) {
    return Status::InvalidArgument("bad address '" + address +
                                   "': expected HOST:PORT (e.g. "
                                   "127.0.0.1:7000) or PORT");
  }
  hp.port = static_cast<uint16_t>(port);
  return hp;
}

namespace {

Result<sockaddr_in> Resolve(const std::string& address) {
  STRIPEFS_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(hp.port);
  if (::inet_pton(AF_INET, hp.host.c_str(), &sa.sin_addr) == 1) return sa;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(hp.host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + hp.host +
                                   "' of address '" + address +
                                   "': " + ::gai_strerror(rc));
  }
  sa.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return sa;
}

std::string Format(const sockaddr_in& sa) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

Result<UniqueFd> NewSocket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return UniqueFd(fd);
}

}  // namespace

Result<UniqueFd> ConnectTcp(const std::string& address, Deadline deadline) {
  STRIPEFS_ASSIGN_OR_RETURN(sockaddr_in sa, Resolve(address));
  STRIPEFS_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket());
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR)
    return Status::FromErrno(errno, "connect");
  if (rc != 0) {
    for (;;) {
      pollfd p{fd.get(), POLLOUT, 0};
      int timeout = -1;
      if (deadline != Deadline::max()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now())
                        .count();
        if (left <= 0) return Status(ETIMEDOUT, "connect timed out");
        timeout = static_cast<int>(std::min<int64_t>(left + 1, 1 << 30));
      }
      int r = ::poll(&p, 1, timeout);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(errno, "poll");
      if (r == 0) continue;
      break;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Status::FromErrno(err, "connect");
  }
  return fd;
}

Result<UniqueFd> ListenTcp(const std::string& address, std::string* bound) {
  STRIPEFS_ASSIGN_OR_RETURN(sockaddr_in sa, Resolve(address));
  STRIPEFS_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket());
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    int err = errno;
    return Status(
        err, "cannot listen on " + address + ": bind: " + std::strerror(err) +
                 (err == EADDRINUSE ? " (another process uses that port; pick "
                                      "another --listen port or stop it)"
                                    : ""));
  }
  // A deep accept queue: a burst of connections (or a flood) must not make
  // the kernel drop a legitimate client's SYN while the loop catches up.
  if (::listen(fd.get(), SOMAXCONN) != 0)
    return Status::FromErrno(errno, "listen on " + address);
  if (bound) *bound = LocalAddress(fd.get());
  return fd;
}

std::string PeerAddress(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "?";
  return Format(sa);
}

std::string LocalAddress(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "?";
  return Format(sa);
}

bool IdleConnectionBroken(int fd) {
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, 0);
  if (r < 0) return true;
  return r > 0;  // readable while idle: EOF, reset or stray bytes
}

}  // namespace stripefs::rpc
