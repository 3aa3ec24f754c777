#include "metrics/metrics_server.h"

#include <prometheus/exposer.h>

#include <charconv>
#include <exception>
#include <mutex>

namespace stripefs::metrics {

class MetricsServer::CollectorSet : public prometheus::Collectable {
 public:
  void Add(Collector c) {
    std::lock_guard<std::mutex> lock(mu_);
    collectors_.push_back(std::move(c));
  }
  Families Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    Families out;
    for (const auto& c : collectors_) c(&out);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Collector> collectors_;
};

Status CheckListenAddress(const std::string& listen) {
  auto colon = listen.rfind(':');
  unsigned port = 0;
  const char* end = listen.data() + listen.size();
  bool ok =
      colon != std::string::npos && colon != 0 && colon + 1 < listen.size();
  if (ok) {
    auto [p, ec] = std::from_chars(listen.data() + colon + 1, end, port);
    ok = ec == std::errc() && p == end && port <= 65535;
  }
  if (ok) return Status::Ok();
  return Status::InvalidArgument("metrics address '" + listen +
                                 "': expected HOST:PORT, e.g. "
                                 "127.0.0.1:9100 (port 0 picks a free one)");
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry) {
  STRIPEFS_RETURN_IF_ERROR(CheckListenAddress(listen));
  auto colon = listen.rfind(':');
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->registry_ = std::move(registry);
  s->collectors_ = std::make_shared<CollectorSet>();
  try {
    // One HTTP thread: scrapes are rare and cheap.
    s->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    return Status(EADDRNOTAVAIL, "cannot serve metrics on " + listen + ": " +
                                     e.what() + " (pick a free HOST:PORT)");
  }
  auto ports = s->exposer_->GetListeningPorts();
  if (ports.empty())
    return Status(EADDRNOTAVAIL,
                  "metrics server on " + listen + " has no listening port");
  s->address_ = listen.substr(0, colon) + ":" + std::to_string(ports.front());
  s->exposer_->RegisterCollectable(s->registry_);
  s->exposer_->RegisterCollectable(s->collectors_);
  return s;
}

MetricsServer::~MetricsServer() { exposer_.reset(); }

void MetricsServer::AddCollector(Collector c) {
  collectors_->Add(std::move(c));
}

prometheus::MetricFamily CounterFamily(std::string name, std::string help) {
  return {
      std::move(name), std::move(help), prometheus::MetricType::Counter, {}};
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  return {std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
}

void Sample(prometheus::MetricFamily* f, double value, const Labels& labels) {
  prometheus::ClientMetric m;
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  if (f->type == prometheus::MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  f->metric.push_back(std::move(m));
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> b = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  return b;
}

}  // namespace stripefs::metrics
