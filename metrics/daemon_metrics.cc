#include "metrics/daemon_metrics.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>

namespace stripefs::metrics {
namespace {

void AddErrorCount(Families* out, const std::string& source, uint64_t errors) {
  auto f = CounterFamily("stripefs_metrics_collect_errors_total",
                         "scrapes that could not read a source");
  Sample(&f, static_cast<double>(errors), {{"source", source}});
  out->push_back(std::move(f));
}

}  // namespace

Collector ChunkStoreCollector(ChunkService* store, uint32_t server_id) {
  auto errors = std::make_shared<std::atomic<uint64_t>>(0);
  return [store, server_id, errors](Families* out) {
    auto s = store->Stats();
    if (!s.ok()) errors->fetch_add(1);
    AddErrorCount(out, "chunk_store", errors->load());
    if (!s.ok()) return;
    const Labels l = {{"server", std::to_string(server_id)}};
    auto gauge = [&](const char* name, const char* help, uint64_t v) {
      auto f = GaugeFamily(name, help);
      Sample(&f, static_cast<double>(v), l);
      out->push_back(std::move(f));
    };
    auto counter = [&](const char* name, const char* help, uint64_t v) {
      auto f = CounterFamily(name, help);
      Sample(&f, static_cast<double>(v), l);
      out->push_back(std::move(f));
    };
    gauge("stripefs_chunk_store_chunks", "chunk versions stored", s->chunks);
    gauge("stripefs_chunk_store_bytes_stored", "bytes of live chunks",
          s->bytes_stored);
    gauge("stripefs_chunk_store_bytes_free",
          "free bytes on the store's file system", s->bytes_free);
    gauge("stripefs_chunk_store_bytes_capacity",
          "size of the store's file system", s->bytes_capacity);
    gauge("stripefs_chunk_store_bytes_reserved",
          "free bytes kept in reserve (writes get ENOSPC below)",
          s->bytes_reserved);
    counter("stripefs_chunk_store_reads_total", "chunk reads since start",
            s->reads);
    counter("stripefs_chunk_store_writes_total", "chunk writes since start",
            s->writes);
    counter("stripefs_chunk_store_crc_errors_total",
            "chunk reads that failed CRC verification since start",
            s->crc_errors);
  };
}

Collector ChunkEngineCollector(const ChunkStore* store, uint32_t server_id) {
  return [store, server_id](Families* out) {
    const ChunkStoreCounters c = store->Counters();
    const Labels l = {{"server", std::to_string(server_id)}};
    // One family per exported row of the counter list (chunk_store_counters.h).
    // The time families are summed over threads: divide by the count their
    // help text names.
    for (const ChunkCounterMetricRow& row : kChunkStoreCounterRows) {
      const double v = static_cast<double>(c.*row.field);
      std::string name = std::string("stripefs_chunk_engine_") + row.stem;
      prometheus::MetricFamily f;
      switch (row.metric) {
        case ChunkCounterMetric::kNone:
          continue;
        case ChunkCounterMetric::kCounter:
          f = CounterFamily(name + "_total", row.help);
          Sample(&f, v, l);
          break;
        case ChunkCounterMetric::kSeconds:
          f = CounterFamily(name + "_total", row.help);
          Sample(&f, v / 1e9, l);
          break;
        case ChunkCounterMetric::kGauge:
          f = GaugeFamily(std::move(name), row.help);
          Sample(&f, v, l);
          break;
      }
      out->push_back(std::move(f));
    }
  };
}

Collector ClusterMapCollector(MetaService* meta) {
  auto errors = std::make_shared<std::atomic<uint64_t>>(0);
  return [meta, errors](Families* out) {
    auto map = meta->GetClusterMap();
    auto st = meta->StatFs();
    if (!map.ok() || !st.ok()) errors->fetch_add(1);
    AddErrorCount(out, "meta_store", errors->load());
    if (st.ok()) {
      auto inodes = GaugeFamily("stripefs_volume_inodes", "inodes in use");
      Sample(&inodes, static_cast<double>(st->inodes));
      out->push_back(std::move(inodes));
      auto used = GaugeFamily("stripefs_volume_bytes_used",
                              "logical bytes of all files");
      Sample(&used, static_cast<double>(st->bytes_used));
      out->push_back(std::move(used));
    }
    if (!map.ok()) return;
    const ServerState states[] = {ServerState::kUp, ServerState::kDown,
                                  ServerState::kOut};
    auto state = GaugeFamily("stripefs_server_state",
                             "1 for the state a chunk server is in, 0 for "
                             "the others");
    auto count = GaugeFamily("stripefs_cluster_servers",
                             "chunk servers in the map, by state");
    for (ServerState want : states) {
      uint64_t n = 0;
      for (const auto& s : map->servers) {
        n += s.state == want;
        Sample(&state, s.state == want ? 1 : 0,
               {{"server", std::to_string(s.id)},
                {"address", s.address},
                {"domain", s.failure_domain},
                {"state", ServerStateName(want)}});
      }
      Sample(&count, static_cast<double>(n),
             {{"state", ServerStateName(want)}});
    }
    out->push_back(std::move(state));
    out->push_back(std::move(count));
    auto epoch =
        GaugeFamily("stripefs_cluster_map_epoch", "epoch of the cluster map");
    Sample(&epoch, static_cast<double>(map->epoch));
    out->push_back(std::move(epoch));
  };
}

Collector ClientTableCollector(rpc::ClientTable* clients) {
  return [clients](Families* out) {
    std::map<std::string, uint64_t> live = {
        {"mount", 0}, {"repair", 0}, {"scrub", 0}};
    auto stripes = GaugeFamily("stripefs_repair_stripes",
                               "progress of running (finished=0) and the "
                               "last finished (finished=1) repair and scrub");
    auto bytes = GaugeFamily("stripefs_repair_bytes_rebuilt",
                             "bytes rebuilt by a running or the last "
                             "finished repair and scrub");
    for (const auto& c : clients->List()) {
      if (!c.finished) ++live[c.kind];
      if (c.kind == "mount") continue;
      Labels l = {{"kind", c.kind},
                  {"client", std::to_string(c.id)},
                  {"finished", c.finished ? "1" : "0"}};
      const std::pair<const char*, uint64_t> parts[] = {
          {"total", c.repair.stripes_total},
          {"seen", c.repair.stripes_seen},
          {"repaired", c.repair.stripes_repaired},
          {"failed", c.repair.stripes_failed}};
      for (const auto& [what, v] : parts) {
        Labels lw = l;
        lw["what"] = what;
        Sample(&stripes, static_cast<double>(v), lw);
      }
      Sample(&bytes, static_cast<double>(c.repair.bytes_rebuilt), l);
    }
    auto count =
        GaugeFamily("stripefs_clients", "clients heartbeating metad, by kind");
    for (const auto& kv : live)
      Sample(&count, static_cast<double>(kv.second), {{"kind", kv.first}});
    out->push_back(std::move(count));
    out->push_back(std::move(stripes));
    out->push_back(std::move(bytes));
  };
}

}  // namespace stripefs::metrics
