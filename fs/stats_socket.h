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
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace stripefs::fs {

// Files a mount daemon keeps for its mountpoint: /run/stripefs/<escaped>.sock
// and .pid when root, else $XDG_RUNTIME_DIR/stripefs/ or /tmp/stripefs-<uid>/.
// <escaped> is the absolute mountpoint with '/' as '-' and other unusual
// characters as %XX.
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

// Connects to `socket_path` and returns the document the daemon sent.
Result<std::string> FetchStats(const std::string& socket_path);

}  // namespace stripefs::fs
