// PollServerLoop: the fallback RpcServer loop, used only when io_uring
// cannot be set up (kernel without io_uring, io_uring_disabled sysctl,
// seccomp) or RpcServerOptions::use_io_uring is false.
//
// One accept thread polls the listener (and a wake pipe for Stop) and
// applies the connection limits (evicting the oldest pending connection
// when needed); every connection gets its own thread that runs the
// handshake, then reads a frame (blocking via poll, with the idle and
// header timeouts), runs the handler and writes the reply, so blocking
// handlers are fine.
//
// Ownership: borrows the ServerCore and the listening fd (both outlive the
// loop); owns the connection fds and threads. Thread-safety: Stop() may be
// called from any thread, once.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "backend/rpc/server_core.h"
#include "backend/rpc/tcp_socket.h"
#include "common/thread_annotations.h"

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
    std::string ip;
    Clock::time_point accepted;
    std::thread thread;
    std::atomic<bool> done{false};
    bool pending = true;   // guarded by mu_
    bool evicted = false;  // guarded by mu_; already out of the limits
  };

  PollServerLoop(ServerCore* core, int listen_fd)
      : core_(core), listen_fd_(listen_fd) {}
  void AcceptLoop();
  void Serve(Connection* c) STRIPEFS_EXCLUDES(mu_);
  void ServeFrames(Connection* c, Session* session, const Caller& caller);
  bool Evicted(Connection* c) STRIPEFS_EXCLUDES(mu_);
  // Applies the limits to a new connection from `ip`.
  bool Admit(const std::string& ip, const std::string& peer)
      STRIPEFS_REQUIRES(mu_);
  void Reap(bool all) STRIPEFS_EXCLUDES(mu_);

  ServerCore* core_;
  int listen_fd_;
  UniqueFd wake_read_, wake_write_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;

  // Also guards the Connection flags (prose: the analysis cannot name the
  // loop's lock from inside Connection).
  Mutex mu_;
  std::list<std::unique_ptr<Connection>> conns_  // oldest first
      STRIPEFS_GUARDED_BY(mu_);
  ConnectionLimits limits_ STRIPEFS_GUARDED_BY(mu_){core_->options};
};

}  // namespace stripefs::rpc
