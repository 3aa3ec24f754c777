// ServerCore and ServerLoop: the parts of RpcServer shared by its two event
// loops (UringServerLoop, the default, and PollServerLoop, the fallback).
//
// ServerCore holds the options, cluster key, handler and counters, and knows
// how to answer one verified request frame (Ping itself, everything else
// through the RpcHandler) and how to count and log a rejected frame.
// ConnectionLimits decides whether a new connection may open (per IP and
// total, pending and authenticated). A ServerLoop owns the threads and
// connections of one running server.
//
// Lines about refused connections and rejected frames go through a
// LogLimiter: a peer sending junk in a loop gets a bounded number of lines
// (the counters still count every one), so it cannot fill the disk.
//
// Thread-safety: ServerCore's methods may be called from any thread (the
// counters are atomics, options/key/handler are read-only after Start, the
// log limiter and the session registry have their own locks, checked by
// clang's -Wthread-safety).
// ConnectionLimits is not thread-safe (the loop calls it from its accept
// thread or under its own lock).
// Internal to backend/rpc; users see RpcServer only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/handshake.h"
#include "backend/rpc/rpc_server.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace stripefs::rpc {

// A token bucket for log lines: `burst` lines at once, then one per
// `every`. Allow() says whether a line may be written now; when it may,
// *dropped is the number of lines refused since the last one allowed (the
// line should say so). Thread-safe.
class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  LogLimiter(uint32_t burst, Clock::duration every)
      : burst_(burst), every_(every), tokens_(burst) {}
  bool Allow(Clock::time_point now, uint64_t* dropped) STRIPEFS_EXCLUDES(mu_);

 private:
  const uint32_t burst_;
  const Clock::duration every_;
  Mutex mu_;
  uint32_t tokens_ STRIPEFS_GUARDED_BY(mu_);
  Clock::time_point last_refill_ STRIPEFS_GUARDED_BY(mu_){};
  uint64_t dropped_ STRIPEFS_GUARDED_BY(mu_) = 0;
};

struct ServerCore {
  ServerCore(RpcServerOptions o, std::shared_ptr<const ClusterKey> k,
             RpcHandler* h)
      : options(std::move(o)), key(std::move(k)), handler(h) {}

  const RpcServerOptions options;
  const std::shared_ptr<const ClusterKey> key;
  RpcHandler* const handler;

  std::atomic<uint64_t> n_connections{0}, n_open{0}, n_requests{0}, n_inline{0},
      n_bad_mac{0}, n_bad_handshake{0}, n_bad_header{0}, n_oversize{0},
      n_truncated{0}, n_pending{0}, n_refused{0}, n_timed_out{0};

  // At most 20 lines at once, then one a second (each saying how many were
  // dropped before it).
  LogLimiter log_limiter{20, std::chrono::seconds(1)};

  RpcServerCounters Counters() const;
  // Counts a frame error (FrameErrorOf(s) != kNone) by class and logs one
  // line naming the peer (rate-limited). Other statuses are ignored.
  void CountReject(const Status& s, const std::string& peer);
  // Logs (rate-limited) and counts that a connection was refused or
  // dropped: `why` names the limit.
  void LogRefused(const std::string& peer, const std::string& why);
  // Logs (rate-limited) and counts a connection closed by a timeout; `what`
  // says which.
  void LogTimeout(const std::string& peer, const char* what);
  // Answers one verified frame: fills the response header and reply.
  // A response frame sent to the server is refused: the frame error is
  // counted and logged here, and the caller must close the connection
  // without answering (false).
  // A caller the gate no longer admits (identity removed) gets EKEYREVOKED
  // for every request.
  bool Answer(Frame& request, const std::string& peer, const Caller& caller,
              FrameHeader* rh, RpcReply* reply);
  // What the handshake needs of this server.
  ServerAuth auth() const { return {key.get(), options.binding, options.gate}; }
  // Writes "<log_name>: <line>" to stderr unless log_limiter says no.
  void Log(const std::string& line);

  // Authenticated connections by the identity they proved, so that
  // RpcServer::CloseSessionsOf can shut them down. A loop registers a
  // connection once its handshake is done and unregisters it before it
  // closes the fd (so a shutdown never reaches a reused descriptor).
  void RegisterSession(int fd, const Caller& caller)
      STRIPEFS_EXCLUDES(sessions_mu_);
  void UnregisterSession(int fd) STRIPEFS_EXCLUDES(sessions_mu_);
  // shutdown(SHUT_RDWR) of every registered connection of `entity`: the
  // loops see the close and free them as usual. Returns how many.
  size_t CloseSessionsOf(const std::string& entity)
      STRIPEFS_EXCLUDES(sessions_mu_);

 private:
  Mutex sessions_mu_;
  std::unordered_map<int, std::string> sessions_  // fd -> entity
      STRIPEFS_GUARDED_BY(sessions_mu_);
};

// Counts open connections per peer IP and in total, pending (handshake not
// done) and all, against the RpcServerOptions limits.
class ConnectionLimits {
 public:
  explicit ConnectionLimits(const RpcServerOptions& o) : o_(o) {}
  enum class Verdict {
    kAdmit,
    kEvictPendingSameIp,  // drop the oldest pending connection of this IP
    kEvictPendingAny,     // drop the oldest pending connection
    kRefuse,
  };
  // For a new connection from `ip`. After an eviction, ask again.
  Verdict Check(const std::string& ip) const;
  // "N connections open (limit)" for the log line of a refusal.
  std::string Describe(const std::string& ip) const;
  void Opened(const std::string& ip);  // a new pending connection
  void Authenticated(const std::string& ip);
  void Closed(const std::string& ip, bool pending);
  size_t pending() const { return pending_; }

 private:
  struct PerIp {
    size_t open = 0;
    size_t pending = 0;
  };
  const RpcServerOptions& o_;
  std::unordered_map<std::string, PerIp> ips_;
  size_t open_ = 0;
  size_t pending_ = 0;
};

// "1.2.3.4" of "1.2.3.4:5678".
std::string IpOf(const std::string& peer);

class ServerLoop {
 public:
  virtual ~ServerLoop() = default;
  // Stops accepting, shuts every connection down, waits for handler calls
  // in progress, joins all threads. Called once.
  virtual void Stop() = 0;
};

}  // namespace stripefs::rpc
