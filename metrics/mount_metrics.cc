#include "metrics/mount_metrics.h"

#include <set>
#include <string>

#include "fuse/opcode_table.h"

namespace stripefs::metrics {

FuseLatencyHistograms::FuseLatencyHistograms(prometheus::Registry& registry)
    : family_(&prometheus::BuildHistogram()
                   .Name("stripefs_fuse_request_duration_seconds")
                   .Help("time from dispatching a FUSE request to the file "
                         "system to its reply, by opcode")
                   .Register(registry)) {}

void FuseLatencyHistograms::OnRequestDone(uint32_t opcode,
                                          std::chrono::nanoseconds latency) {
  size_t slot =
      opcode < fuse_abi::kOpcodeLimit ? opcode : fuse_abi::kOpcodeLimit;
  prometheus::Histogram* h = by_opcode_[slot].load(std::memory_order_acquire);
  if (!h) {
    // Family::Add returns the same metric for equal labels, so a race is
    // harmless.
    h = &family_->Add({{"op", std::string(fuse::OpcodeName(opcode))}},
                      LatencyBuckets());
    by_opcode_[slot].store(h, std::memory_order_release);
  }
  h->Observe(std::chrono::duration<double>(latency).count());
}

namespace {

using nlohmann::json;

// JSON objects whose keys are label values, not metric names.
struct LabeledMap {
  const char* path;  // section path joined with '.'
  const char* family;
  const char* label;
};
constexpr LabeledMap kLabeledMaps[] = {
    {"errors", "stripefs_mount_errors_total", "errno"},
    {"requests_by_opcode", "stripefs_fuse_requests_total", "op"},
    {"coalescing.partial_flushes",
     "stripefs_mount_coalescing_partial_flushes_total", "reason"},
};

// Sections that are all settings, and single values that are levels or
// settings rather than monotonic counts.
const std::set<std::string>& GaugeSections() {
  static const std::set<std::string> s = {"volume", "negotiated"};
  return s;
}
const std::set<std::string>& GaugeKeys() {
  static const std::set<std::string> s = {"pid",
                                          "enabled",
                                          "idle_flush_ms",
                                          "frontier_hold_ms",
                                          "memory_cap",
                                          "buffered_bytes",
                                          "aligned_pct",
                                          "mean_size",
                                          "full_stripe_pct",
                                          "still_degraded"};
  return s;
}

class Flattener {
 public:
  explicit Flattener(Families* out) : out_(out) {}

  void Walk(const json& j, const std::string& path, bool gauge_section) {
    for (const auto& lm : kLabeledMaps) {
      if (path == lm.path) return LabeledFamily(j, lm);
    }
    if (path == "queues") return Queues(j);
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        bool gauges = gauge_section ||
                      (path.empty() && GaugeSections().count(it.key()) > 0);
        Walk(it.value(), path.empty() ? it.key() : path + "." + it.key(),
             gauges);
      }
      return;
    }
    if (!j.is_number() && !j.is_boolean()) return;  // strings: not metrics
    std::string key = path.substr(path.rfind('.') + 1);
    bool gauge = gauge_section || GaugeKeys().count(key) > 0;
    std::string name = "stripefs_mount_" + Snake(path);
    auto f = gauge ? GaugeFamily(name, "`stripefs stat` " + path)
                   : CounterFamily(name + "_total", "`stripefs stat` " + path);
    Sample(&f, Value(j));
    out_->push_back(std::move(f));
  }

 private:
  static std::string Snake(std::string s) {
    for (char& c : s)
      if (c == '.') c = '_';
    return s;
  }
  static double Value(const json& j) {
    return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>();
  }
  void LabeledFamily(const json& j, const LabeledMap& lm) {
    auto f = CounterFamily(lm.family, std::string("`stripefs stat` ") +
                                          lm.path + " by " + lm.label);
    for (auto it = j.begin(); j.is_object() && it != j.end(); ++it) {
      if (it.value().is_number())
        Sample(&f, Value(it.value()), {{lm.label, it.key()}});
    }
    out_->push_back(std::move(f));
  }
  void Queues(const json& j) {
    for (const char* key : {"requests", "foreground", "background"}) {
      auto f =
          CounterFamily(std::string("stripefs_fuse_queue_") + key + "_total",
                        std::string("FUSE requests per transport "
                                    "queue: ") +
                            key);
      for (const auto& q : j) {
        if (!q.is_object() || !q.contains(key)) continue;
        Sample(&f, Value(q[key]),
               {{"transport", q.value("transport", "")},
                {"queue", std::to_string(q.value("queue", 0))}});
      }
      out_->push_back(std::move(f));
    }
  }
  Families* out_;
};

}  // namespace

void AppendStatsFamilies(const json& stats, Families* out) {
  Flattener(out).Walk(stats, "", false);
}

Collector MountStatsCollector(const fs::StripeFs* fs) {
  return [fs](Families* out) { AppendStatsFamilies(fs->StatsJson(), out); };
}

Result<std::unique_ptr<MetricsServer>> ServeMountMetrics(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry,
    const fs::StripeFs* fs) {
  if (listen.empty()) return std::unique_ptr<MetricsServer>();
  STRIPEFS_ASSIGN_OR_RETURN(auto server,
                            MetricsServer::Start(listen, std::move(registry)));
  server->AddCollector(MountStatsCollector(fs));
  return server;
}

}  // namespace stripefs::metrics
