// RPC metrics of a daemon (metad, chunkd):
//   TimedRpcHandler   wraps the daemon's RpcHandler and records how long
//                     each request took to handle, by message type, in
//                     stripefs_rpc_request_duration_seconds{role, op}
//                     (chunk RPCs on chunkd; commits = op="CommitStripe(s)"
//                     on metad). Handling time only: queueing in the
//                     server loop and the network are not in it.
//   RpcServerCollector  the server's connection / request / reject counts.
// Ownership: TimedRpcHandler does not own `inner`; both reference objects
// that must outlive their use. Thread-safety: Handle is called from the
// server's worker threads (and its loop thread, for inline requests)
// concurrently; the histograms are thread-safe.
#pragma once

#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <array>
#include <atomic>

#include "backend/rpc/rpc_server.h"
#include "metrics/metrics_server.h"

namespace stripefs::metrics {

class TimedRpcHandler : public rpc::RpcHandler {
 public:
  TimedRpcHandler(rpc::RpcHandler* inner, prometheus::Registry& registry);
  std::string Role() const override { return inner_->Role(); }
  void Handle(const rpc::Caller&, uint16_t type,
              std::span<const uint8_t> payload, AlignedBytes& bulk,
              rpc::RpcReply* reply) override;
  bool InlineSafe(uint16_t type,
                  std::span<const uint8_t> payload) const override {
    return inner_->InlineSafe(type, payload);
  }

 private:
  prometheus::Histogram& For(uint16_t type);
  rpc::RpcHandler* inner_;
  prometheus::Family<prometheus::Histogram>* family_;
  // Message types are small numbers (wire_messages.h); the rest share one.
  static constexpr size_t kTypes = 256;
  std::array<std::atomic<prometheus::Histogram*>, kTypes + 1> by_type_{};
};

// stripefs_rpc_{connections_total, open_connections, requests_total,
// rejected_frames_total{reason}, refused_connections_total,
// timed_out_connections_total} of `server` (not owned).
Collector RpcServerCollector(const rpc::RpcServer* server, std::string role);

}  // namespace stripefs::metrics
