#include "fs/stats_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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

bool OwnedDirectory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
         st.st_uid == ::geteuid();
}

// The user's runtime directory; "" when there is none (EnsureRuntimeDir
// then names the fix).
std::string UserDir() {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/')
    return std::string(x) + "/stripefs";
  const std::string run_user = "/run/user/" + std::to_string(::geteuid());
  if (OwnedDirectory(run_user)) return run_user + "/stripefs";
  if (const char* h = std::getenv("HOME"); h && *h == '/' && OwnedDirectory(h))
    return std::string(h) + "/.cache/stripefs";
  return "";
}

std::string ModeString(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
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

Status EnsureRuntimeDir(const std::string& dir) {
  if (dir.empty())
    return Status::NotFound(
        "no private directory for stripefs runtime files: set "
        "XDG_RUNTIME_DIR to a directory only you can use (e.g. export "
        "XDG_RUNTIME_DIR=/run/user/$(id -u)), or set HOME");
  const bool root_dir = dir == "/run/stripefs";
  const mode_t allowed = root_dir ? 0755 : 0700;
  // The parent of ~/.cache/stripefs may be missing; make it private too.
  const std::string parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty() && ::mkdir(parent.c_str(), 0700) != 0 &&
      errno != EEXIST)
    return Status::FromErrno(errno, "cannot create " + parent);
  if (::mkdir(dir.c_str(), allowed) != 0 && errno != EEXIST)
    return Status::FromErrno(errno, "cannot create runtime directory " + dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return Status::FromErrno(errno, "runtime directory " + dir);
  const std::string fix = "; remove it (rm -r " + dir +
                          ") so stripefs makes a private one";
  if (S_ISLNK(st.st_mode))
    return Status(EPERM, "runtime directory " + dir + " is a symlink" + fix);
  if (!S_ISDIR(st.st_mode))
    return Status(ENOTDIR,
                  "runtime directory " + dir + " is not a directory" + fix);
  if (st.st_uid != ::geteuid())
    return Status(EPERM, "runtime directory " + dir + " belongs to uid " +
                             std::to_string(st.st_uid) + ", not to you (uid " +
                             std::to_string(::geteuid()) + ")" + fix);
  if ((st.st_mode & 0777 & ~allowed) != 0)
    return Status(EPERM, "runtime directory " + dir + " has mode " +
                             ModeString(st.st_mode) + "; run `chmod " +
                             ModeString(allowed).substr(1) + " " + dir + "`");
  return Status::Ok();
}

Status WritePidFile(const std::string& path) {
  const std::string tmp = path + ".new." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover of this pid (removes a link, never
                          // its target)
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(errno, "cannot create " + tmp);
  const std::string line = std::to_string(::getpid()) + "\n";
  const bool ok =
      ::write(fd, line.data(), line.size()) ==
      static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Status::FromErrno(errno, "cannot write pid file " + path);
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

Result<int> OpenLogFile(const std::string& path) {
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC |
                      O_NONBLOCK,
                  0600);
  if (fd < 0) {
    if (errno == ELOOP)
      return Status(ELOOP, "log file " + path +
                               " is a symlink; remove it (stripefs never "
                               "writes through one)");
    return Status::FromErrno(errno, "cannot open log file " + path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status(EPERM, "log file " + path +
                             " is not a regular file of yours; remove it");
  }
  ::fcntl(fd, F_SETFL, O_APPEND);  // blocking writes from here on
  return fd;
}

Result<std::unique_ptr<StatsServer>> StatsServer::Start(
    const std::string& socket_path, std::function<std::string()> producer) {
  std::unique_ptr<StatsServer> s(new StatsServer());
  s->path_ = socket_path;
  s->producer_ = std::move(producer);
  STRIPEFS_RETURN_IF_ERROR(EnsureRuntimeDir(
      std::filesystem::path(socket_path).parent_path().string()));
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

Result<std::string> FetchStats(const std::string& socket_path,
                               std::chrono::milliseconds timeout,
                               size_t max_bytes) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path too long: " + socket_path);
  }
  std::strcpy(addr.sun_path, socket_path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno(errno, "socket(AF_UNIX)");
  // A unix connect completes at once or fails (EAGAIN: backlog full).
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status st = Status::FromErrno(errno, "connecting to " + socket_path);
    ::close(fd);
    return st;
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::close(fd);
      return Status(ETIMEDOUT, "the daemon at " + socket_path +
                                   " did not send its statistics within " +
                                   std::to_string(timeout.count()) + " ms");
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return Status(EMSGSIZE, "the daemon at " + socket_path +
                                  " sent more than " +
                                  std::to_string(max_bytes) +
                                  " bytes of statistics; not a stripefs "
                                  "stats socket?");
    }
  }
  ::close(fd);
  if (out.empty()) return Status::IoError("the daemon sent no statistics");
  return out;
}

}  // namespace stripefs::fs
