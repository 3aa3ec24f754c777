// `stripefs status`: one screen on the health of a cluster, like `ceph -s`.
//
//   stripefs status --meta HOST:PORT --key FILE [--metrics HOST:PORT] [--json]
//   stripefs status --dir D [--json]          (a cluster `cluster up` made)
//
// Gathers metad's map and volume statistics, asks every chunk server
// itself (ping + store statistics, in parallel, 2 s each), walks the stripe
// map to count degraded stripes (missing chunks, or chunks on servers that
// are not up and answering), lists metad's clients (mounts and running or
// last finished repairs with their progress: backend/rpc/client_table.h)
// and, with metad's /metrics, its open connections, then judges:
//   HEALTH_ERR   metad unreachable; fewer than k servers answer; stripes
//                with more than m chunks unavailable; raw space > 95 % used
//   HEALTH_WARN  a server down, out, or not answering; degraded stripes
//                (with advice by cause, tools/status_degraded.h: servers
//                unavailable -> repair once back; no space -> the mounts
//                heal them once there is room); fewer than k+m servers up;
//                raw space > 85 % used
//   HEALTH_OK    none of these
// Exit code: 0 OK, 1 WARN, 2 ERR (3 for bad arguments).
#include <bit>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/client/placement.h"
#include "backend/rpc/cluster_key.h"
#include "backend/rpc/remote_chunk_service.h"
#include "backend/rpc/remote_meta_service.h"
#include "common/human_bytes.h"
#include "metrics/scrape.h"
#include "tools/cluster_files.h"
#include "tools/command.h"
#include "tools/status_degraded.h"

namespace stripefs::tools {
namespace {

using nlohmann::json;

constexpr double kWarnUsedPct = 85, kErrUsedPct = 95;
constexpr uint64_t kMaxScannedStripes = 1'000'000;
constexpr uint32_t kStripePage = 4096;

struct StatusFlags {
  std::string meta, key, metrics, dir;
  bool json = false;
  bool secure = false;  // encrypted connection to metad (--secure)
};

struct ServerReport {
  ServerInfo info;
  bool answers = false;
  std::string why;  // when not answering
  std::optional<ChunkStoreStats> stats;
};

struct StatusReport {
  std::string meta_address;
  Geometry geometry;
  uint64_t epoch = 0;
  std::vector<ServerReport> servers;
  FsStats volume;
  uint64_t stripes = 0, degraded = 0, unreadable = 0;
  DegradedCounts causes;  // of `degraded`, by cause
  bool scanned_all = true;
  std::string scan_error;  // the stripe walk failed: counts are partial
  uint64_t raw_capacity = 0, raw_free = 0, chunk_bytes = 0;
  std::optional<double> client_connections;
  std::optional<std::vector<rpc::ClientRecord>> clients;  // none: old metad
  std::string clients_error;
  std::string health = "HEALTH_OK";
  std::vector<std::string> checks;
};

// "12.3 GiB": sizes that are not exact units, for the usage lines.
std::string Approx(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char out[32];
  std::snprintf(out, sizeof(out), u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return out;
}

uint64_t Mounts(const StatusReport& r) {
  uint64_t n = 0;
  for (const auto& c : *r.clients) n += c.kind == "mount" && !c.finished;
  return n;
}

// "1234/5000 stripes checked, 80 repaired, 3.1 MiB/s, ETA 12 s"
std::string RepairLine(const rpc::ClientRecord& c) {
  const rpc::RepairReport& p = c.repair;
  const double secs = static_cast<double>(p.elapsed_ms) / 1000.0;
  std::string line = std::to_string(p.stripes_seen) + "/" +
                     (p.stripes_total ? std::to_string(p.stripes_total) : "?") +
                     " stripes checked, " + std::to_string(p.stripes_repaired) +
                     " repaired";
  if (p.stripes_failed) {
    line += ", " + std::to_string(p.stripes_failed) + " FAILED";
    if (p.stripes_unreachable)
      line += " (" + std::to_string(p.stripes_unreachable) +
              " only for servers down)";
  }
  line += ", " + Approx(p.bytes_rebuilt) + " rebuilt";
  char buf[96];
  if (secs > 0) {
    std::snprintf(buf, sizeof(buf), " in %.1f s (%s/s)", secs,
                  Approx(static_cast<uint64_t>(
                             static_cast<double>(p.bytes_rebuilt) / secs))
                      .c_str());
    line += buf;
  }
  if (!c.finished && secs > 0 && p.stripes_seen > 0 &&
      p.stripes_total >= p.stripes_seen) {
    double eta = static_cast<double>(p.stripes_total - p.stripes_seen) * secs /
                 static_cast<double>(p.stripes_seen);
    std::snprintf(buf, sizeof(buf), ", ETA %.0f s", eta);
    line += buf;
  }
  return line;
}

json ClientsJson(const StatusReport& r) {
  json j = {{"connections", r.client_connections ? json(static_cast<uint64_t>(
                                                       *r.client_connections))
                                                 : json(nullptr)}};
  if (!r.clients) {
    j["mounts"] = nullptr;
    j["error"] = r.clients_error;
    return j;
  }
  j["mounts"] = Mounts(r);
  json list = json::array(), repairs = json::array();
  for (const auto& c : *r.clients) {
    json e = {
        {"kind", c.kind},
        {"description", c.description},
        {"seconds_since_heartbeat", static_cast<double>(c.age_ms) / 1000}};
    if (c.kind == "mount") {
      list.push_back(e);
      continue;
    }
    const rpc::RepairReport& p = c.repair;
    e["running"] = !c.finished;
    e["stripes_total"] = p.stripes_total;
    e["stripes_checked"] = p.stripes_seen;
    e["stripes_repaired"] = p.stripes_repaired;
    e["stripes_failed"] = p.stripes_failed;
    e["stripes_unreachable"] = p.stripes_unreachable;
    e["chunks_rebuilt"] = p.chunks_rebuilt;
    e["bytes_rebuilt"] = p.bytes_rebuilt;
    e["seconds"] = static_cast<double>(p.elapsed_ms) / 1000;
    repairs.push_back(e);
  }
  j["list"] = list;
  j["repairs"] = repairs;
  return j;
}

std::string Name(const ServerInfo& s) {
  return "chunkd " + std::to_string(s.id) + " (" + s.address + ")";
}

ServerReport AskServer(const ServerInfo& s,
                       const std::shared_ptr<const rpc::ClusterKey>& key) {
  ServerReport r{s, false, "", std::nullopt};
  rpc::RpcClientOptions o = rpc::RemoteChunkService::DefaultOptions();
  o.call_timeout = std::chrono::milliseconds(2000);
  o.connect_timeout = std::chrono::milliseconds(1000);
  rpc::RemoteChunkService chunk(s.address, key, o);
  auto st = chunk.Stats();
  r.answers = st.ok();
  if (st.ok())
    r.stats = *st;
  else
    r.why = st.status().ToString();
  return r;
}

// Raw capacity: stores sharing a file system (same host and fs id) count
// once.
void SumCapacity(StatusReport* r) {
  std::map<std::pair<std::string, uint64_t>, const ChunkStoreStats*> fs;
  for (const auto& s : r->servers) {
    if (!s.stats) continue;
    r->chunk_bytes += s.stats->bytes_stored;
    std::string host = s.info.address.substr(0, s.info.address.rfind(':'));
    fs[{host, s.stats->fs_id}] = &*s.stats;
  }
  for (const auto& [k, st] : fs) {
    r->raw_capacity += st->bytes_capacity;
    r->raw_free += st->bytes_free;
  }
}

// Counts stripes with chunks missing or on servers not up and answering,
// and those with more than m such chunks.
Status ScanStripes(MetaService& meta, const ClusterMap& map, StatusReport* r) {
  const uint32_t width = r->geometry.k + r->geometry.m;
  auto placement = Placement::Create(map, width);
  if (!placement.ok()) return placement.status();
  std::map<uint32_t, bool> usable;
  std::map<uint32_t, StatusServer> servers;
  for (const auto& s : r->servers) {
    usable[s.info.id] = s.answers && s.info.state == ServerState::kUp;
    StatusServer& v = servers[s.info.id];
    v.usable = usable[s.info.id];
    v.full = s.stats && s.stats->bytes_free <=
                            s.stats->bytes_reserved + r->geometry.cell_size;
  }
  uint64_t after_inode = 0, after_stripe = 0;
  bool first = true;
  for (;;) {
    auto page = meta.ListStripes(after_inode, after_stripe, kStripePage);
    if (!page.ok()) return page.status();
    for (const auto& ref : *page) {
      if (!first && ref.inode == after_inode && ref.sv.stripe == after_stripe)
        continue;
      first = false;
      ++r->stripes;
      uint32_t gone = ref.sv.missing_mask;
      auto ids = placement->ServersFor(ref.inode, ref.sv.stripe);
      for (uint32_t i = 0; i < ids.size() && i < 32; ++i)
        if (!usable[ids[i]]) gone |= 1u << i;
      if (gone) {
        ++r->degraded;
        r->causes.Add(ClassifyDegraded(ref.sv.missing_mask, ids, servers));
      }
      if (static_cast<uint32_t>(std::popcount(gone)) > r->geometry.m)
        ++r->unreadable;
      after_inode = ref.inode;
      after_stripe = ref.sv.stripe;
    }
    if (page->size() < kStripePage) return Status::Ok();
    if (r->stripes >= kMaxScannedStripes) {
      r->scanned_all = false;
      return Status::Ok();
    }
  }
}

void Judge(StatusReport* r) {
  auto warn = [&](const std::string& why) {
    if (r->health == "HEALTH_OK") r->health = "HEALTH_WARN";
    r->checks.push_back(why);
  };
  auto err = [&](const std::string& why) {
    r->health = "HEALTH_ERR";
    r->checks.push_back(why);
  };
  uint32_t up = 0, answering = 0;
  for (const auto& s : r->servers) {
    answering += s.answers;
    up += s.info.state == ServerState::kUp && s.answers;
    if (s.info.state == ServerState::kDown)
      warn(Name(s.info) + " is down");
    else if (s.info.state == ServerState::kOut)
      warn(Name(s.info) + " is out (its chunks move to others on repair)");
    else if (!s.answers)
      warn(Name(s.info) +
           " does not answer (metad still lists it up): " + s.why);
  }
  const uint32_t width = r->geometry.k + r->geometry.m;
  if (answering < r->geometry.k)
    err(std::to_string(answering) + " chunk servers answer, fewer than k=" +
        std::to_string(r->geometry.k) + ": no stripe can be read");
  else if (up < width)
    warn(std::to_string(up) + " chunk servers up, fewer than k+m=" +
         std::to_string(width) + ": new stripes are written degraded");
  if (r->unreadable)
    err(std::to_string(r->unreadable) + " stripes have more than m=" +
        std::to_string(r->geometry.m) + " chunks unavailable (unreadable)");
  for (const std::string& line :
       DegradedAdvice(r->causes, "stripefs repair --meta " + r->meta_address +
                                     " --key FILE"))
    warn(line);
  if (!r->scan_error.empty())
    warn("stripe map walk failed, stripe counts are partial: " + r->scan_error);
  if (r->raw_capacity) {
    double used = 100.0 * static_cast<double>(r->raw_capacity - r->raw_free) /
                  static_cast<double>(r->raw_capacity);
    char pct[32];
    std::snprintf(pct, sizeof(pct), "%.1f", used);
    if (used > kErrUsedPct)
      err(std::string("raw space ") + pct + " % used");
    else if (used > kWarnUsedPct)
      warn(std::string("raw space ") + pct + " % used");
  }
}

Result<StatusReport> Gather(const StatusFlags& f) {
  StatusReport r;
  r.meta_address = f.meta;
  if (!f.metrics.empty()) {
    // Before our own connection to metad, so it is not counted.
    auto text = metrics::Scrape(f.metrics);
    if (text.ok()) {
      auto e = metrics::ParseExposition(*text);
      if (e.Has("stripefs_rpc_open_connections"))
        r.client_connections = e.Sum("stripefs_rpc_open_connections");
    }
  }
  STRIPEFS_ASSIGN_OR_RETURN(auto key, rpc::ClusterKey::Load(f.key));
  if (f.secure) key = key->WithSecureWire(true);
  rpc::RpcClientOptions o = rpc::RemoteMetaService::DefaultOptions();
  o.call_timeout = std::chrono::milliseconds(3000);
  rpc::RemoteMetaService meta(f.meta, key, o);
  STRIPEFS_ASSIGN_OR_RETURN(r.geometry, meta.GetGeometry());
  STRIPEFS_ASSIGN_OR_RETURN(auto map, meta.GetClusterMap());
  STRIPEFS_ASSIGN_OR_RETURN(r.volume, meta.StatFs());
  r.epoch = map.epoch;
  if (auto c = meta.ListClients(); c.ok())
    r.clients = std::move(*c);
  else
    r.clients_error = c.status().ToString();
  std::vector<std::future<ServerReport>> asks;
  for (const auto& s : map.servers)
    asks.push_back(std::async(std::launch::async, AskServer, s, key));
  for (auto& a : asks) r.servers.push_back(a.get());
  SumCapacity(&r);
  if (Status s = ScanStripes(meta, map, &r); !s.ok())
    r.scan_error = s.ToString();
  Judge(&r);
  return r;
}

json ToJson(const StatusReport& r) {
  json servers = json::array();
  for (const auto& s : r.servers) {
    json j = {{"id", s.info.id},
              {"address", s.info.address},
              {"domain", s.info.failure_domain},
              {"state", ServerStateName(s.info.state)},
              {"answers", s.answers}};
    if (!s.answers) j["error"] = s.why;
    if (s.stats) {
      j["chunks"] = s.stats->chunks;
      j["bytes_stored"] = s.stats->bytes_stored;
      j["bytes_free"] = s.stats->bytes_free;
    }
    servers.push_back(j);
  }
  json j = {{"health", {{"status", r.health}, {"checks", r.checks}}},
            {"meta", {{"address", r.meta_address}, {"map_epoch", r.epoch}}},
            {"geometry",
             {{"k", r.geometry.k},
              {"m", r.geometry.m},
              {"cell_size", r.geometry.cell_size}}},
            {"servers", servers},
            {"stripes",
             {{"total", r.stripes},
              {"degraded", r.degraded},
              {"degraded_unavailable", r.causes.unavailable},
              {"degraded_no_space", r.causes.no_space},
              {"degraded_rebuild", r.causes.rebuild},
              {"unreadable", r.unreadable},
              {"scanned_all", r.scanned_all}}},
            {"capacity",
             {{"raw_bytes", r.raw_capacity},
              {"raw_free_bytes", r.raw_free},
              {"chunk_bytes", r.chunk_bytes},
              {"file_bytes", r.volume.bytes_used},
              {"inodes", r.volume.inodes}}},
            {"clients", ClientsJson(r)}};
  return j;
}

void PrintRepairs(const StatusReport& r) {
  bool running = false;
  for (const auto& c :
       r.clients ? *r.clients : std::vector<rpc::ClientRecord>{}) {
    if (c.kind == "mount") continue;
    running |= !c.finished;
    if (c.finished)
      std::printf("    last %s: %s, %.0f s ago\n", c.kind.c_str(),
                  RepairLine(c).c_str(), static_cast<double>(c.age_ms) / 1000);
    else
      std::printf("    %s running (%s): %s\n", c.kind.c_str(),
                  c.description.c_str(), RepairLine(c).c_str());
  }
  if (!running) {
    const char* what = "nothing to repair";
    if (r.causes.unavailable || r.causes.rebuild)
      what = "needed (see health), none running";
    else if (r.causes.no_space)
      what = "not needed: the mounts heal stripes degraded for space";
    std::printf("    repair:  %s\n", what);
  }
}

void PrintScreen(const StatusReport& r) {
  std::printf("  cluster:\n    health: %s\n", r.health.c_str());
  for (const auto& c : r.checks) std::printf("            %s\n", c.c_str());
  uint32_t n[3] = {0, 0, 0};
  uint32_t silent = 0;
  for (const auto& s : r.servers) {
    ++n[static_cast<int>(s.info.state)];
    silent += !s.answers;
  }
  std::printf(
      "\n  services:\n    metad:  %s, map epoch %llu, volume %u+%u "
      "cell %s\n",
      r.meta_address.c_str(), static_cast<unsigned long long>(r.epoch),
      r.geometry.k, r.geometry.m, HumanBytes(r.geometry.cell_size).c_str());
  std::printf(
      "    chunkd: %zu servers: %u up, %u down, %u out; %u not "
      "answering\n",
      r.servers.size(), n[0], n[1], n[2], silent);
  for (const auto& s : r.servers) {
    std::printf("      %-4u %-22s %-5s %s\n", s.info.id, s.info.address.c_str(),
                ServerStateName(s.info.state),
                s.answers
                    ? (s.stats ? (std::to_string(s.stats->chunks) +
                                  " chunks, " + Approx(s.stats->bytes_stored))
                                     .c_str()
                               : "")
                    : "NOT ANSWERING");
  }
  if (r.clients) {
    const uint64_t mounts = Mounts(r);
    std::printf("    clients: %llu mount%s",
                static_cast<unsigned long long>(mounts),
                mounts == 1 ? "" : "s");
    if (r.client_connections)
      std::printf(" (%.0f connections to metad)", *r.client_connections);
    std::printf("\n");
  } else {
    std::printf("    clients: unknown (%s)\n", r.clients_error.c_str());
  }
  std::printf("\n  data:\n    files:   %llu inodes, %s\n",
              static_cast<unsigned long long>(r.volume.inodes),
              Approx(r.volume.bytes_used).c_str());
  std::printf("    stripes: %llu%s, %llu degraded, %llu unreadable\n",
              static_cast<unsigned long long>(r.stripes),
              r.scanned_all ? "" : "+ (scan stopped)",
              static_cast<unsigned long long>(r.degraded),
              static_cast<unsigned long long>(r.unreadable));
  std::printf("    usage:   %s chunks, %s used of %s raw (%s free)\n",
              Approx(r.chunk_bytes).c_str(),
              Approx(r.raw_capacity - r.raw_free).c_str(),
              Approx(r.raw_capacity).c_str(), Approx(r.raw_free).c_str());
  PrintRepairs(r);
}

int RunStatus(StatusFlags f) {
  if (!f.dir.empty()) {
    f.meta = ReadFirstLine(f.dir + "/metad.addr");
    f.key = f.dir + "/cluster.key";
    if (f.metrics.empty()) f.metrics = ReadFirstLine(f.dir + "/metad.metrics");
    if (f.meta.empty()) {
      std::fprintf(stderr,
                   "stripefs status: no metad address in %s/metad.addr; "
                   "start the cluster with `stripefs cluster up --dir %s`\n",
                   f.dir.c_str(), f.dir.c_str());
      return 3;
    }
  } else if (f.meta.empty() || f.key.empty()) {
    std::fprintf(stderr,
                 "stripefs status: give --meta HOST:PORT and --key FILE, or "
                 "--dir D of a `stripefs cluster up` cluster\n");
    return 3;
  }
  auto r = Gather(f);
  if (!r.ok()) {
    StatusReport bad;
    bad.meta_address = f.meta;
    bad.health = "HEALTH_ERR";
    bad.checks.push_back("metad at " + f.meta + ": " + r.status().ToString());
    if (f.json)
      std::printf(
          "%s\n",
          json({{"health", {{"status", bad.health}, {"checks", bad.checks}}}})
              .dump(2)
              .c_str());
    else
      std::printf("  cluster:\n    health: HEALTH_ERR\n            %s\n",
                  bad.checks[0].c_str());
    return 2;
  }
  if (f.json)
    std::printf("%s\n", ToJson(*r).dump(2).c_str());
  else
    PrintScreen(*r);
  return r->health == "HEALTH_OK" ? 0 : r->health == "HEALTH_WARN" ? 1 : 2;
}

const CommandRegistration kRegister([](CLI::App& app) {
  auto* c = app.add_subcommand(
      "status",
      "cluster health on one screen: servers, HEALTH_OK/WARN/ERR and why, "
      "degraded stripes, repair progress, capacity, clients (exit 0 OK, 1 "
      "WARN, 2 ERR)");
  static StatusFlags f;
  c->add_option("--meta", f.meta, "metad HOST:PORT");
  c->add_option("--key", f.key, "cluster key file");
  c->add_flag("--secure", f.secure,
              "encrypt the connection (needed when metad runs with --secure)");
  c->add_option("--metrics", f.metrics,
                "metad's metrics HOST:PORT (for the client count)");
  c->add_option("--dir", f.dir,
                "cluster directory of `stripefs cluster up` (instead of "
                "--meta/--key)");
  c->add_flag("--json", f.json, "print JSON");
  c->callback([] { ExitWith(RunStatus(f)); });
});

}  // namespace
}  // namespace stripefs::tools
