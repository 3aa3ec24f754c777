// Metrics of the mount daemon (`stripefs mount --metrics ADDR:PORT`):
//   FuseLatencyHistograms  a fuse::RequestObserver recording the time from
//                          dispatch to reply of every FUSE request the file
//                          system answers, in
//                          stripefs_fuse_request_duration_seconds{op}.
//   MountStatsCollector    every number of `stripefs stat` (StripeFs::
//                          StatsJson), read at scrape time: counters as
//                          stripefs_mount_<section>_<name>_total, settings
//                          and levels as gauges, per-errno / per-opcode /
//                          per-queue / per-flush-reason maps as labels
//                          (table in mount_metrics.cc, names in README).
// Ownership: neither owns what it observes; the StripeFs must outlive the
// MetricsServer, the histograms the Session. Thread-safety: both are
// called from many threads at once and are safe to.
#pragma once

#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <array>
#include <atomic>
#include <nlohmann/json.hpp>

#include "fs/stripe_fs.h"
#include "fuse/fuse_abi.h"
#include "fuse/session.h"
#include "metrics/metrics_server.h"

namespace stripefs::metrics {

class FuseLatencyHistograms : public fuse::RequestObserver {
 public:
  explicit FuseLatencyHistograms(prometheus::Registry& registry);
  void OnRequestDone(uint32_t opcode,
                     std::chrono::nanoseconds latency) override;

 private:
  prometheus::Family<prometheus::Histogram>* family_;
  std::array<std::atomic<prometheus::Histogram*>, fuse_abi::kOpcodeLimit + 1>
      by_opcode_{};
};

// Families for one StatsJson document (exposed for tests of the mapping).
void AppendStatsFamilies(const nlohmann::json& stats, Families* out);
Collector MountStatsCollector(const fs::StripeFs* fs);

// The mount's endpoint on `listen` serving `registry` (with the
// FuseLatencyHistograms) and MountStatsCollector(fs); null when `listen`
// is empty (metrics are opt-in for mounts).
Result<std::unique_ptr<MetricsServer>> ServeMountMetrics(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry,
    const fs::StripeFs* fs);

}  // namespace stripefs::metrics
