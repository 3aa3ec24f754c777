#include "metrics/rpc_metrics.h"

#include <chrono>

#include "backend/rpc/chunk_grant.h"
#include "backend/rpc/wire_messages.h"

namespace stripefs::metrics {

TimedRpcHandler::TimedRpcHandler(rpc::RpcHandler* inner,
                                 prometheus::Registry& registry)
    : inner_(inner),
      family_(&prometheus::BuildHistogram()
                   .Name("stripefs_rpc_request_duration_seconds")
                   .Help("time to handle one RPC request in the daemon, by "
                         "message type")
                   .Register(registry)) {}

prometheus::Histogram& TimedRpcHandler::For(uint16_t type) {
  size_t slot = type < kTypes ? type : kTypes;
  prometheus::Histogram* h = by_type_[slot].load(std::memory_order_acquire);
  if (h) return *h;
  const char* name = slot < kTypes ? rpc::MsgTypeName(type) : nullptr;
  // Family::Add is idempotent for equal labels, so a race adds one metric.
  h = &family_->Add({{"role", inner_->Role()}, {"op", name ? name : "other"}},
                    LatencyBuckets());
  by_type_[slot].store(h, std::memory_order_release);
  return *h;
}

void TimedRpcHandler::Handle(const rpc::Caller& caller, uint16_t type,
                             std::span<const uint8_t> payload,
                             AlignedBytes& bulk, rpc::RpcReply* reply) {
  auto start = std::chrono::steady_clock::now();
  inner_->Handle(caller, type, payload, bulk, reply);
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  // A chunk request under grants counts as the message it carries.
  if (type == rpc::kGrantedCallType && payload.size() >= 2)
    type = static_cast<uint16_t>(payload[0] | (payload[1] << 8));
  For(type).Observe(took.count());
}

Collector RpcServerCollector(const rpc::RpcServer* server, std::string role) {
  return [server, role](Families* out) {
    rpc::RpcServerCounters c = server->counters();
    const Labels r = {{"role", role}};
    auto counter = [&](const char* name, const char* help, uint64_t v) {
      auto f = CounterFamily(name, help);
      Sample(&f, static_cast<double>(v), r);
      out->push_back(std::move(f));
    };
    counter("stripefs_rpc_connections_total", "connections accepted",
            c.connections);
    counter("stripefs_rpc_requests_total", "authenticated requests handled",
            c.requests);
    counter("stripefs_rpc_inline_requests_total",
            "of those, handled on the event loop thread (no worker hand-off)",
            c.inline_requests);
    counter("stripefs_rpc_refused_connections_total",
            "connections refused or evicted over a limit",
            c.refused_connections);
    counter("stripefs_rpc_timed_out_connections_total",
            "connections closed by the handshake, header or idle timeout",
            c.timed_out_connections);
    auto open = GaugeFamily("stripefs_rpc_open_connections",
                            "connections open now (pending included)");
    Sample(&open, static_cast<double>(c.open_connections), r);
    out->push_back(std::move(open));
    auto pending = GaugeFamily("stripefs_rpc_pending_connections",
                               "connections open now that have not finished "
                               "the handshake");
    Sample(&pending, static_cast<double>(c.pending_connections), r);
    out->push_back(std::move(pending));
    auto rej = CounterFamily("stripefs_rpc_rejected_frames_total",
                             "frames or handshakes rejected, by reason");
    const std::pair<const char*, uint64_t> reasons[] = {
        {"bad_mac", c.rejected_bad_mac},
        {"bad_handshake", c.rejected_bad_handshake},
        {"bad_header", c.rejected_bad_header},
        {"oversize", c.rejected_oversize},
        {"truncated", c.rejected_truncated}};
    for (const auto& [why, v] : reasons)
      Sample(&rej, static_cast<double>(v), {{"role", role}, {"reason", why}});
    out->push_back(std::move(rej));
  };
}

}  // namespace stripefs::metrics
