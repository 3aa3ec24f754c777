// StatsSocket: how `stripefs stat MNT` reaches the daemon serving MNT.
//
// The daemon listens on a unix socket whose path is derived from the
// mountpoint (RuntimePaths); a client connects, the server writes one JSON
// document (StripeFs::StatsJson) and closes. Serving stats never touches the
// FUSE request path, so reading them does not disturb I/O.
//
// StatsServer owns its listening socket and one accept thread (polls so
// Stop() is prompt); the producer is called on that thread and must be
// thread-safe. Not copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace stripefs::fs {

// Files a mount daemon keeps for its mountpoint: /run/stripefs/<escaped>.sock,
// .pid and .log when root, else in $XDG_RUNTIME_DIR/stripefs/, or
// /run/user/<uid>/stripefs/ when that is the user's, or $HOME/.cache/stripefs/
// (never a predictable /tmp path another user could create first).
// <escaped> is the absolute mountpoint with '/' as '-' and other unusual
// characters as %XX. The directory is checked (EnsureRuntimeDir) before
// anything is written in it; files are opened O_NOFOLLOW | O_CLOEXEC.
struct RuntimePaths {
  std::string dir;
  std::string socket;
  std::string pidfile;
  std::string log;
};
// `mountpoint` is made absolute (realpath when it exists).
RuntimePaths RuntimePathsFor(const std::string& mountpoint);
// Every candidate location (root's and the user's), for clients.
std::vector<RuntimePaths> RuntimePathCandidates(const std::string& mountpoint);

// Makes `dir` (a RuntimePaths::dir) ready for runtime files: created when
// missing (0700; root's /run/stripefs 0755, its stats socket is for every
// user), then refused with a one-line error naming the fix when it is a
// symlink, not a directory, not owned by the effective user, or writable by
// group or others (a user's: readable by them either).
Status EnsureRuntimeDir(const std::string& dir);
// Writes this process's pid to `path` in a checked directory: a new file
// (O_EXCL | O_NOFOLLOW) renamed over `path`, so whatever was planted at
// `path` (a symlink to a victim file) is replaced, never followed.
Status WritePidFile(const std::string& path);
// Opens the daemon log `path` for appending (O_NOFOLLOW | O_CLOEXEC, new
// files 0600); a symlink, a non-regular file or another user's file is
// refused. The caller owns the returned fd.
Result<int> OpenLogFile(const std::string& path);

class StatsServer {
 public:
  static Result<std::unique_ptr<StatsServer>> Start(
      const std::string& socket_path, std::function<std::string()> producer);
  ~StatsServer();  // Stop() + unlink the socket
  StatsServer(const StatsServer&) = delete;
  StatsServer& operator=(const StatsServer&) = delete;
  void Stop();

 private:
  StatsServer() = default;
  void Loop();
  std::string path_;
  int fd_ = -1;
  std::function<std::string()> producer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Connects to `socket_path` and returns the document the daemon sent:
// ETIMEDOUT when it is not all there within `timeout`, EMSGSIZE past
// `max_bytes` (a stuck or hostile socket cannot hang or bloat the client).
inline constexpr size_t kMaxStatsBytes = 16u << 20;
Result<std::string> FetchStats(
    const std::string& socket_path,
    std::chrono::milliseconds timeout = std::chrono::seconds(10),
    size_t max_bytes = kMaxStatsBytes);

}  // namespace stripefs::fs
