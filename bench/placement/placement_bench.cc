// `stripefs bench placement`: simulates the real backend/client Placement
// (not a model of it) on a large cluster map and reports
//   - balance: max/mean chunks per server over S stripes (goal <= 1.05);
//   - movement: the share of chunks whose server changes when one server
//     goes down, is marked out, is removed from the map, or one is added
//     (goal ~1/N; on a loss only the lost server's chunks);
//   - cost: time and heap per Placement::Create and per ServersForGroup
//     (what every stripe read or write computes: the client keeps no table).
// Stripes map to placement groups, so all counts are computed per group
// (ServersForGroup once per group and scenario) and weighted by the stripes
// hashed to each group: exact for the stripe population, and affordable.
//
// Prints one `ratio=` line per measure with the load average; writes
// placement.md and placement.csv to --out DIR (default a fresh directory
// under the cwd). Timing only; no assertion. Single-threaded.
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/client/placement.h"
#include "backend/meta/meta_types.h"
#include "bench/support/process_sampling.h"

namespace stripefs {
namespace {

using bench::LoadAvg;

struct Options {
  uint32_t servers = 10000;
  uint32_t per_domain = 10;  // servers per failure domain
  uint64_t stripes = 10000000;
  uint32_t stripes_per_file = 64;
  uint32_t k = 4;
  uint32_t m = 2;
  uint32_t pg_count = Placement::kDefaultPgCount;
  std::string out;
};

size_t HeapInUse() { return mallinfo2().uordblks; }

// CPU seconds of this thread: the cost of a placement, less distorted by
// the machine's load than wall time.
double CpuNow() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ClusterMap MakeMap(const Options& o) {
  ClusterMap map;
  map.epoch = 1;
  for (uint32_t i = 0; i < o.servers; ++i) {
    ServerInfo s;
    s.id = i + 1;
    s.address = "127.0.0.1:" + std::to_string(10000 + i);
    s.failure_domain = "rack" + std::to_string(i / o.per_domain);
    s.state = ServerState::kUp;
    map.servers.push_back(s);
  }
  return map;
}

// Servers of every placement group, and the cost of computing them.
struct GroupTable {
  std::vector<std::vector<uint32_t>> servers;  // [pg] -> ids per chunk index
  double create_s = 0;                         // Placement::Create
  size_t create_heap = 0;                      // heap held by the Placement
  double per_group_s = 0;  // mean CPU time of one ServersForGroup
};

GroupTable Compute(const ClusterMap& map, const Options& o) {
  GroupTable t;
  const size_t heap0 = HeapInUse();
  const double t0 = Now();
  auto p = Placement::Create(map, o.k + o.m, o.pg_count);
  t.create_s = Now() - t0;
  t.create_heap = HeapInUse() - heap0;
  if (!p.ok()) {
    std::fprintf(stderr, "placement: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  t.servers.resize(o.pg_count);
  const double t1 = CpuNow();
  for (uint32_t pg = 0; pg < o.pg_count; ++pg) {
    t.servers[pg] = p->ServersForGroup(pg);
  }
  t.per_group_s = (CpuNow() - t1) / o.pg_count;
  return t;
}

// Stripes per placement group: files of stripes_per_file stripes, inode
// numbers from 2 as MetaStore hands them out.
std::vector<uint64_t> StripesPerGroup(const Placement& p, const Options& o) {
  std::vector<uint64_t> count(o.pg_count, 0);
  for (uint64_t s = 0; s < o.stripes; ++s) {
    count[p.PlacementGroup(2 + s / o.stripes_per_file,
                           s % o.stripes_per_file)]++;
  }
  return count;
}

struct Balance {
  double mean = 0;
  uint64_t max = 0;
  uint64_t min = 0;
};

Balance ChunksPerServer(const GroupTable& t, const std::vector<uint64_t>& n,
                        uint32_t max_id, uint32_t usable) {
  std::vector<uint64_t> load(max_id + 1, 0);
  uint64_t total = 0;
  for (size_t pg = 0; pg < t.servers.size(); ++pg) {
    for (uint32_t id : t.servers[pg]) {
      load[id] += n[pg];
      total += n[pg];
    }
  }
  Balance b;
  b.mean = static_cast<double>(total) / usable;
  b.max = *std::max_element(load.begin(), load.end());
  b.min = UINT64_MAX;
  for (uint32_t id = 1; id <= max_id; ++id) b.min = std::min(b.min, load[id]);
  return b;
}

struct Movement {
  uint64_t moved = 0;        // chunks whose server changed
  uint64_t moved_other = 0;  // of those, not on the lost server
  uint64_t total = 0;
};

Movement Compare(const GroupTable& before, const GroupTable& after,
                 const std::vector<uint64_t>& n, uint32_t lost_id) {
  Movement mv;
  for (size_t pg = 0; pg < n.size(); ++pg) {
    for (size_t i = 0; i < before.servers[pg].size(); ++i) {
      mv.total += n[pg];
      if (before.servers[pg][i] == after.servers[pg][i]) continue;
      mv.moved += n[pg];
      if (before.servers[pg][i] != lost_id) mv.moved_other += n[pg];
    }
  }
  return mv;
}

struct Row {
  std::string name, value, goal, note;
};

int Run(const Options& o) {
  std::vector<Row> rows;
  const std::string load_start = LoadAvg(",");
  const ClusterMap map = MakeMap(o);
  std::printf(
      "placement: %u servers in %u failure domains, %llu stripes, "
      "k+m=%u+%u, %u placement groups, load=%s\n",
      o.servers, (o.servers + o.per_domain - 1) / o.per_domain,
      static_cast<unsigned long long>(o.stripes), o.k, o.m, o.pg_count,
      load_start.c_str());
  std::fflush(stdout);
  const GroupTable base = Compute(map, o);
  auto p = Placement::Create(map, o.k + o.m, o.pg_count);
  const std::vector<uint64_t> n = StripesPerGroup(*p, o);

  const Balance b = ChunksPerServer(base, n, o.servers, o.servers);
  const double ratio = b.max / b.mean;
  const double slots = double(o.pg_count) * (o.k + o.m) / o.servers;
  std::printf(
      "ratio=%.3f max/mean chunks per server (goal <= 1.05): max=%llu "
      "mean=%.0f min=%llu; %.2f group-chunks per server\n",
      ratio, static_cast<unsigned long long>(b.max), b.mean,
      static_cast<unsigned long long>(b.min), slots);
  rows.push_back({"max/mean chunks per server",
                  std::to_string(ratio).substr(0, 5), "<= 1.05",
                  "max " + std::to_string(b.max) + ", mean " +
                      std::to_string(static_cast<uint64_t>(b.mean)) + ", min " +
                      std::to_string(b.min) + ", " +
                      std::to_string(slots).substr(0, 5) +
                      " placement-group chunks per server"});

  // One server changes; which one does not matter (hash order): the first.
  const uint32_t victim = 1;
  struct Scenario {
    const char* name;
    ClusterMap map;
    const char* goal;
  };
  std::vector<Scenario> scenarios;
  {
    ClusterMap down = map;
    down.epoch++;
    down.servers[0].state = ServerState::kDown;
    scenarios.push_back({"down (lost, not yet out)", down,
                         "0 (chunks missing, "
                         "read degraded)"});
    ClusterMap out = map;
    out.epoch++;
    out.servers[0].state = ServerState::kOut;
    scenarios.push_back({"marked out", out, "~1/N, only its chunks"});
    ClusterMap removed = map;
    removed.epoch++;
    removed.servers.erase(removed.servers.begin());
    scenarios.push_back(
        {"removed from the map", removed, "~1/N, only its chunks"});
    ClusterMap added = map;
    added.epoch++;
    ServerInfo s;
    s.id = o.servers + 1;
    s.address = "127.0.0.1:9";
    // Into an existing domain (the last): a new domain of one server would
    // draw more than its share (domains are filled evenly first).
    s.failure_domain = "rack" + std::to_string((o.servers - 1) / o.per_domain);
    added.servers.push_back(s);
    scenarios.push_back({"one server added", added, "~1/N"});
  }
  const double one_over_n = 1.0 / o.servers;
  for (const Scenario& sc : scenarios) {
    const GroupTable after = Compute(sc.map, o);
    const Movement mv = Compare(base, after, n, victim);
    const bool added = sc.map.servers.size() > map.servers.size();
    const double share = double(mv.moved) / mv.total;
    const double other = double(mv.moved_other) / mv.total;
    std::printf(
        "ratio=%.3f moved share / (1/N) when %s: moved %.5f%% of "
        "chunks, %.5f%% not from server %u\n",
        share / one_over_n, sc.name, 100 * share, 100 * other, victim);
    std::fflush(stdout);
    rows.push_back(
        {std::string("chunks moved, ") + sc.name,
         std::to_string(100 * share).substr(0, 7) + " %", sc.goal,
         std::to_string(share / one_over_n).substr(0, 5) + " x 1/N" +
             (added ? ""
                    : "; not from the lost server: " +
                          std::to_string(100 * other).substr(0, 7) + " %")});
  }
  // Cost of one placement.
  std::printf(
      "value=%.1f CPU us per ServersForGroup (every stripe I/O computes "
      "one); Placement::Create %.1f ms, heap %zu bytes\n",
      base.per_group_s * 1e6, base.create_s * 1e3, base.create_heap);
  rows.push_back({"CPU time per placement (ServersForGroup)",
                  std::to_string(base.per_group_s * 1e6).substr(0, 6) + " us",
                  "", "O(servers x chunks) hashes, no table kept"});
  rows.push_back({"Placement::Create",
                  std::to_string(base.create_s * 1e3).substr(0, 6) + " ms, " +
                      std::to_string(base.create_heap / 1024) + " KiB heap",
                  "", "one candidate entry per server"});
  const std::string load_end = LoadAvg(",");
  std::printf("load=%s (start %s)\n", load_end.c_str(), load_start.c_str());

  std::ostringstream md;
  md << "| measure | value | goal | detail |\n|---|---|---|---|\n";
  for (const Row& r : rows) {
    md << "| " << r.name << " | " << r.value << " | " << r.goal << " | "
       << r.note << " |\n";
  }
  md << "\n"
     << o.servers << " servers (" << o.per_domain << " per failure domain), "
     << o.stripes << " stripes, k+m " << o.k << "+" << o.m << ", " << o.pg_count
     << " placement groups; load average " << load_start << " at start, "
     << load_end << " at end.\n";
  std::filesystem::create_directories(o.out);
  std::ofstream(o.out + "/placement.md") << md.str();
  std::ofstream csv(o.out + "/placement.csv");
  csv << "measure,value,goal,detail\n";
  for (const Row& r : rows) {
    csv << '"' << r.name << "\",\"" << r.value << "\",\"" << r.goal << "\",\""
        << r.note << "\"\n";
  }
  std::printf("results in %s/placement.md\n", o.out.c_str());
  return 0;
}

}  // namespace
}  // namespace stripefs

int main(int argc, char** argv) {
  stripefs::Options o;
  bool quick = false;
  CLI::App app{
      "Simulates backend/client Placement at scale: balance, movement on "
      "server loss/out/add, cost per placement"};
  app.add_flag("--quick", quick, "10^3 servers and 10^6 stripes");
  app.add_option("--servers", o.servers, "servers (default 10^4)")
      ->check(CLI::Range(8u, 1000000u));
  app.add_option("--stripes", o.stripes, "stripes (default 10^7)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--per-domain", o.per_domain, "servers per failure domain")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--pg-count", o.pg_count, "placement groups")
      ->check(CLI::Range(1u, 1u << 24));
  app.add_option("--out", o.out,
                 "directory for placement.md/.csv (default: a fresh "
                 "bench-placement-* directory under the cwd)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    if (app.count("--servers") == 0) o.servers = 1000;
    if (app.count("--stripes") == 0) o.stripes = 1000000;
  }
  if (o.servers < o.k + o.m) {
    std::fprintf(stderr, "--servers must be at least k+m = %u\n", o.k + o.m);
    return 2;
  }
  if (o.out.empty()) {
    char tmpl[] = "bench-placement-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("bench placement: mkdtemp in the cwd (pass --out DIR)");
      return 1;
    }
    o.out = tmpl;
  }
  return stripefs::Run(o);
}
