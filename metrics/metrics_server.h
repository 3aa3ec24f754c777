// MetricsServer: one Prometheus endpoint (GET /metrics, text exposition
// format) of a stripefs process, over prometheus-cpp: its Exposer serves a
// Registry of counters and histograms that code updates as things happen,
// plus Collectors that turn counters the process already keeps (RPC server,
// chunk store, cluster map, `stripefs stat`) into metric families when
// scraped, so nothing is counted twice.
//
// Ownership: owns the exposer (and its HTTP threads) and the collectors;
// shares the registry. A collector may reference objects that outlive the
// server: destroy the server first (it stops serving in its destructor).
// Thread-safety: AddCollector and address() from any thread; collectors
// run on the exposer's threads, one scrape at a time per collector set,
// and must be thread-safe against the process's own work.
// Limits: plain HTTP, no authentication; bind it to an address only the
// monitoring network reaches (docs/cluster.md).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace prometheus {
class Exposer;
}

namespace stripefs::metrics {

using Families = std::vector<prometheus::MetricFamily>;
// Appends the families it knows to *out (called on every scrape).
using Collector = std::function<void(Families* out)>;
using Labels = std::map<std::string, std::string>;

class MetricsServer {
 public:
  // Listens on "HOST:PORT" (port 0 picks a free one) and serves `registry`
  // and every collector added later. EADDRINUSE etc. as a Status.
  static Result<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void AddCollector(Collector c);
  // "HOST:PORT" with the port actually bound.
  const std::string& address() const { return address_; }

 private:
  class CollectorSet;
  MetricsServer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<CollectorSet> collectors_;
  std::string address_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // last: stops first
};

// EINVAL naming the fix unless `listen` is HOST:PORT with a port in
// 0..65535 (port 0 picks a free one). Start() checks it too; commands call
// it to reject a bad address before they fork or mount.
Status CheckListenAddress(const std::string& listen);

// Family builders for collectors. Sample() adds one value with labels.
prometheus::MetricFamily CounterFamily(std::string name, std::string help);
prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
void Sample(prometheus::MetricFamily* f, double value,
            const Labels& labels = {});

// Latency buckets (seconds) of every stripefs histogram: 50 us .. 10 s.
const std::vector<double>& LatencyBuckets();

}  // namespace stripefs::metrics
