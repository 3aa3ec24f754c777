// ServerCore and ServerLoop: the parts of RpcServer shared by its two event
// loops (UringServerLoop, the default, and PollServerLoop, the fallback).
//
// ServerCore holds the options, cluster key, handler and counters, and knows
// how to answer one verified request frame (Ping itself, everything else
// through the RpcHandler) and how to count and log a rejected frame. A
// ServerLoop owns the threads and connections of one running server.
//
// Thread-safety: ServerCore's methods may be called from any thread (the
// counters are atomics, options/key/handler are read-only after Start).
// Internal to backend/rpc; users see RpcServer only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/rpc/cluster_key.h"
#include "backend/rpc/frame.h"
#include "backend/rpc/rpc_server.h"
#include "common/status.h"

namespace stripefs::rpc {

struct ServerCore {
  ServerCore(RpcServerOptions o, std::shared_ptr<const ClusterKey> k,
             RpcHandler* h)
      : options(std::move(o)), key(std::move(k)), handler(h) {}

  const RpcServerOptions options;
  const std::shared_ptr<const ClusterKey> key;
  RpcHandler* const handler;

  std::atomic<uint64_t> n_connections{0}, n_open{0}, n_requests{0},
      n_bad_mac{0}, n_bad_crc{0}, n_bad_header{0}, n_oversize{0},
      n_truncated{0};

  RpcServerCounters Counters() const;
  // Counts a frame error (FrameErrorOf(s) != kNone) by class and logs one
  // line naming the peer. Other statuses are ignored.
  void CountReject(const Status& s, const std::string& peer);
  // Logs that a connection was refused because `open` connections are open.
  void LogRefused(const std::string& peer, size_t open) const;
  // Answers one verified frame: fills the response header and reply.
  // A response frame sent to the server is refused: the frame error is
  // counted and logged here, and the caller must close the connection
  // without answering (false).
  bool Answer(Frame& request, const std::string& peer, FrameHeader* rh,
              RpcReply* reply);
};

class ServerLoop {
 public:
  virtual ~ServerLoop() = default;
  // Stops accepting, shuts every connection down, waits for handler calls
  // in progress, joins all threads. Called once.
  virtual void Stop() = 0;
};

}  // namespace stripefs::rpc
