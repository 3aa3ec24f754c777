// PollServerLoop: the fallback RpcServer loop, used only when io_uring
// cannot be set up (kernel without io_uring, io_uring_disabled sysctl,
// seccomp) or RpcServerOptions::use_io_uring is false.
//
// One accept thread polls the listener (and a wake pipe for Stop); every
// connection gets its own thread that reads a frame (blocking via poll),
// runs the handler and writes the reply, so blocking handlers are fine.
//
// Ownership: borrows the ServerCore and the listening fd (both outlive the
// loop); owns the connection fds and threads. Thread-safety: Stop() may be
// called from any thread, once.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend/rpc/server_core.h"
#include "backend/rpc/tcp_socket.h"

namespace stripefs::rpc {

class PollServerLoop : public ServerLoop {
 public:
  static Result<std::unique_ptr<PollServerLoop>> Start(ServerCore* core,
                                                       int listen_fd);
  ~PollServerLoop() override;
  void Stop() override;

 private:
  struct Connection {
    UniqueFd fd;
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  PollServerLoop(ServerCore* core, int listen_fd)
      : core_(core), listen_fd_(listen_fd) {}
  void AcceptLoop();
  void Serve(Connection* c);
  void Reap(bool all);

  ServerCore* core_;
  int listen_fd_;
  UniqueFd wake_read_, wake_write_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  std::mutex mu_;  // guards conns_
  std::list<std::unique_ptr<Connection>> conns_;
};

}  // namespace stripefs::rpc
