#include "fs/stats_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace stripefs::fs {

namespace {

std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

std::string Escape(const std::string& abs) {
  std::string out;
  for (unsigned char c : abs) {
    if (c == '/') {
      out.push_back('-');
    } else if (std::isalnum(c) || c == '.' || c == '_') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  if (out.size() > 80) out = out.substr(out.size() - 80);  // sun_path limit
  return out;
}

RuntimePaths PathsIn(const std::string& dir, const std::string& escaped) {
  RuntimePaths p;
  p.dir = dir;
  p.socket = dir + "/" + escaped + ".sock";
  p.pidfile = dir + "/" + escaped + ".pid";
  p.log = dir + "/" + escaped + ".log";
  return p;
}

std::string UserDir() {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) {
    return std::string(x) + "/stripefs";
  }
  return "/tmp/stripefs-" + std::to_string(::getuid());
}

}  // namespace

RuntimePaths RuntimePathsFor(const std::string& mountpoint) {
  const std::string esc = Escape(Absolute(mountpoint));
  return PathsIn(::geteuid() == 0 ? "/run/stripefs" : UserDir(), esc);
}

std::vector<RuntimePaths> RuntimePathCandidates(const std::string& mountpoint) {
  const std::string esc = Escape(Absolute(mountpoint));
  std::vector<RuntimePaths> v{PathsIn("/run/stripefs", esc)};
  if (::geteuid() != 0) v.push_back(PathsIn(UserDir(), esc));
  return v;
}

Result<std::unique_ptr<StatsServer>> StatsServer::Start(
    const std::string& socket_path, std::function<std::string()> producer) {
  std::unique_ptr<StatsServer> s(new StatsServer());
  s->path_ = socket_path;
  s->producer_ = std::move(producer);
  std::error_code ec;
  std::filesystem::create_directories(
      std::filesystem::path(socket_path).parent_path(), ec);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("stats socket path too long: " +
                                   socket_path);
  }
  std::strcpy(addr.sun_path, socket_path.c_str());
  s->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->fd_ < 0) return Status::FromErrno(errno, "socket(AF_UNIX)");
  ::unlink(socket_path.c_str());  // a stale socket of a dead daemon
  if (::bind(s->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::FromErrno(errno, "bind " + socket_path);
  }
  ::chmod(socket_path.c_str(), 0666);  // stats are not secret
  if (::listen(s->fd_, 8) != 0)
    return Status::FromErrno(errno, "listen " + socket_path);
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

void StatsServer::Loop() {
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    if (r <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::string doc = producer_();
    doc.push_back('\n');
    size_t off = 0;
    while (off < doc.size()) {
      ssize_t n = ::send(c, doc.data() + off, doc.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(c);
  }
}

void StatsServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
  }
}

StatsServer::~StatsServer() { Stop(); }

Result<std::string> FetchStats(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path too long: " + socket_path);
  }
  std::strcpy(addr.sun_path, socket_path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket(AF_UNIX)");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status st = Status::FromErrno(errno, "connecting to " + socket_path);
    ::close(fd);
    return st;
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (out.empty()) return Status::IoError("the daemon sent no statistics");
  return out;
}

}  // namespace stripefs::fs
