// `stripefs bench placement`: runs the real backend/client Placement (not a
// model of it), both schemes side by side in one run, on a large cluster
// map, and reports
//   - balance: max/mean chunks per server over S stripes (goal <= 1.05),
//     for two stripe populations:
//       files:  files of --stripes-per-file stripes with consecutive inode
//               numbers from 2 (MetaStore hands inodes out in order);
//       random: every stripe an independent (random inode, random stripe
//               number): a population with no structure to exploit;
//   - movement: the share of chunks whose server changes when one server
//     goes down, is marked out, is removed from the map, or one is added
//     (goal <= 1.1 x 1/N; on a loss or mark-out 0 from other servers);
//   - cost: CPU per placement (a table lookup, ServersFor), and time and
//     heap per Placement::Create (the per-epoch table).
// Stripes map to placement groups, so balance and movement are computed
// per group (a table row) weighted by the stripes of the population in each
// group: exact for the population, and affordable at 10^8 stripes.
//
// Prints `ratio=` lines with the load average; writes placement.md and
// placement.csv to --out DIR (default a fresh directory under the cwd).
// Timing only; no assertion. Single-threaded.
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
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
  uint32_t groups = 0;  // kBalanced; 0 = sized for the cluster
  std::string out;
};

// Heap in use, mmapped blocks (large tables) included.
size_t HeapInUse() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// CPU seconds of this thread: less distorted by the machine's load than
// wall time.
double CpuNow() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

ClusterMap MakeMap(const Options& o, PlacementScheme scheme) {
  ClusterMap map;
  map.epoch = 1;
  map.placement = scheme;
  map.placement_groups = scheme == PlacementScheme::kBalanced ? o.groups : 0;
  for (uint32_t i = 0; i < o.servers; ++i) {
    ServerInfo s;
    s.id = i + 1;
    s.address = "127.0.0.1:" + std::to_string(10000 + i);
    s.failure_domain = "rack" + std::to_string(i / o.per_domain);
    map.servers.push_back(s);
  }
  return map;
}

struct Built {
  Placement p;
  double create_cpu_s;
  size_t heap;
};

Built Create(const ClusterMap& map, const Options& o) {
  const size_t heap0 = HeapInUse();
  const double t0 = CpuNow();
  auto p = Placement::Create(map, o.k + o.m);
  const double cpu = CpuNow() - t0;
  if (!p.ok()) {
    std::fprintf(stderr, "placement: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  return {std::move(p).value(), cpu, HeapInUse() - heap0};
}

// Stripes per group for a population.
std::vector<uint64_t> StripesPerGroup(const Placement& p, const Options& o,
                                      bool files) {
  std::vector<uint64_t> count(p.group_count(), 0);
  std::mt19937_64 rng(42);
  for (uint64_t s = 0; s < o.stripes; ++s) {
    const uint64_t ino = files ? 2 + s / o.stripes_per_file : rng();
    const uint64_t stripe = files ? s % o.stripes_per_file : rng() >> 24;
    count[p.PlacementGroup(ino, stripe)]++;
  }
  return count;
}

struct Balance {
  double mean = 0, ratio = 0;
  uint64_t max = 0, min = 0;
};

Balance ChunksPerServer(const Placement& p, const std::vector<uint64_t>& n,
                        uint32_t max_id) {
  std::vector<uint64_t> load(max_id + 1, 0);
  uint64_t total = 0;
  for (uint32_t g = 0; g < p.group_count(); ++g) {
    for (uint32_t id : p.Row(g)) {
      load[id] += n[g];
      total += n[g];
    }
  }
  Balance b;
  b.mean = static_cast<double>(total) / max_id;
  b.max = *std::max_element(load.begin() + 1, load.end());
  b.min = *std::min_element(load.begin() + 1, load.end());
  b.ratio = b.max / b.mean;
  return b;
}

struct Movement {
  uint64_t moved = 0, moved_other = 0, total = 0;
};

Movement Compare(const Placement& a, const Placement& b,
                 const std::vector<uint64_t>& n, uint32_t lost_id) {
  Movement mv;
  for (uint32_t g = 0; g < a.group_count(); ++g) {
    auto x = a.Row(g), y = b.Row(g);
    for (size_t i = 0; i < x.size(); ++i) {
      mv.total += n[g];
      if (x[i] == y[i]) continue;
      mv.moved += n[g];
      if (x[i] != lost_id) mv.moved_other += n[g];
    }
  }
  return mv;
}

// CPU per ServersFor (the lookup every stripe I/O does), over 10^6 stripes.
double LookupCpu(const Placement& p) {
  constexpr uint64_t kCalls = 1000000;
  uint64_t sink = 0;
  const double t0 = CpuNow();
  for (uint64_t s = 0; s < kCalls; ++s)
    sink += p.ServersFor(2 + s / 64, s % 64)[0];
  const double cpu = (CpuNow() - t0) / kCalls;
  if (sink == 1) std::printf(" ");  // keeps the loop
  return cpu;
}

struct Row {
  std::string name, legacy, balanced, goal, note;
};

struct Scenario {
  std::string name, goal;
  ClusterMap legacy, balanced;
};

// The map with server 1 down / out / removed, or one server added (into
// the last failure domain: a new domain of one server would draw more than
// its share, domains being filled evenly first).
std::vector<Scenario> Scenarios(const ClusterMap& l, const ClusterMap& b,
                                const Options& o) {
  auto vary = [&](auto change) {
    ClusterMap x = l, y = b;
    change(x), change(y);
    x.epoch++, y.epoch++;
    return std::pair(x, y);
  };
  std::vector<Scenario> out;
  auto add = [&](std::string name, std::string goal, auto change) {
    auto [x, y] = vary(change);
    out.push_back({std::move(name), std::move(goal), x, y});
  };
  add("down (lost, not yet out)", "0",
      [](ClusterMap& m) { m.servers[0].state = ServerState::kDown; });
  add("marked out", "its chunks, 0 from others",
      [](ClusterMap& m) { m.servers[0].state = ServerState::kOut; });
  add("removed from the map (server 1, first in id order)", "~1/N",
      [](ClusterMap& m) { m.servers.erase(m.servers.begin()); });
  add("one server added", "<= 1.1 x 1/N", [&](ClusterMap& m) {
    ServerInfo s;
    s.id = o.servers + 1;
    s.address = "127.0.0.1:9";
    s.failure_domain = "rack" + std::to_string((o.servers - 1) / o.per_domain);
    m.servers.push_back(s);
  });
  return out;
}

void AddBalanceRows(const Built& l, const Built& b, const Options& o,
                    std::vector<Row>* rows) {
  for (bool files : {true, false}) {
    const Balance bl =
        ChunksPerServer(l.p, StripesPerGroup(l.p, o, files), o.servers);
    const Balance bb =
        ChunksPerServer(b.p, StripesPerGroup(b.p, o, files), o.servers);
    const char* pop = files ? "files" : "random";
    std::printf(
        "ratio=%.3f max/mean chunks per server, balanced, %s stripes (goal "
        "<= 1.05): max=%llu mean=%.0f min=%llu; legacy ratio=%.3f; "
        "legacy/balanced ratio=%.2f\n",
        bb.ratio, pop, static_cast<unsigned long long>(bb.max), bb.mean,
        static_cast<unsigned long long>(bb.min), bl.ratio, bl.ratio / bb.ratio);
    std::fflush(stdout);
    rows->push_back(
        {std::string("max/mean chunks per server, ") + pop + " stripes",
         Fmt("%.3f", bl.ratio), Fmt("%.3f", bb.ratio), "<= 1.05",
         "balanced: max " + std::to_string(bb.max) + ", mean " +
             Fmt("%.0f", bb.mean) + ", min " + std::to_string(bb.min)});
  }
}

void AddMovementRows(const Built& l, const Built& b, const ClusterMap& lm,
                     const ClusterMap& bm, const Options& o,
                     std::vector<Row>* rows) {
  const std::vector<uint64_t> nl = StripesPerGroup(l.p, o, true);
  const std::vector<uint64_t> nb = StripesPerGroup(b.p, o, true);
  const double one_over_n = 1.0 / o.servers;
  for (const Scenario& sc : Scenarios(lm, bm, o)) {
    const Built la = Create(sc.legacy, o), ba = Create(sc.balanced, o);
    const Movement ml = Compare(l.p, la.p, nl, 1);
    const Movement mb = Compare(b.p, ba.p, nb, 1);
    const double sl = double(ml.moved) / ml.total / one_over_n;
    const double sb = double(mb.moved) / mb.total / one_over_n;
    const double ob = double(mb.moved_other) / mb.total;
    const double ol = double(ml.moved_other) / ml.total;
    std::printf(
        "ratio=%.3f moved x 1/N when %s, balanced (legacy ratio=%.3f); not "
        "from server 1: balanced %.5f%%, legacy %.5f%%\n",
        sb, sc.name.c_str(), sl, 100 * ob, 100 * ol);
    std::fflush(stdout);
    rows->push_back({"chunks moved x 1/N, " + sc.name, Fmt("%.3f", sl),
                     Fmt("%.3f", sb), sc.goal,
                     "not from server 1: legacy " + Fmt("%.5f", 100 * ol) +
                         " %, balanced " + Fmt("%.5f", 100 * ob) + " %"});
  }
}

int Run(Options o) {
  std::vector<Row> rows;
  const std::string load_start = LoadAvg(",");
  const ClusterMap lm = MakeMap(o, PlacementScheme::kLegacy);
  const ClusterMap bm = MakeMap(o, PlacementScheme::kBalanced);
  std::printf(
      "placement: %u servers in %u failure domains, %llu stripes (%u per "
      "file), k+m=%u+%u, legacy %u groups, balanced %u groups (%.1f "
      "group-chunks per server), load=%s\n",
      o.servers, (o.servers + o.per_domain - 1) / o.per_domain,
      static_cast<unsigned long long>(o.stripes), o.stripes_per_file, o.k, o.m,
      Placement::kLegacyPgCount, o.groups,
      double(o.groups) * (o.k + o.m) / o.servers, load_start.c_str());
  std::fflush(stdout);
  const Built l = Create(lm, o), b = Create(bm, o);
  AddBalanceRows(l, b, o, &rows);
  AddMovementRows(l, b, lm, bm, o, &rows);

  const double cl = LookupCpu(l.p), cb = LookupCpu(b.p);
  double scan = CpuNow();
  for (uint32_t g = 0; g < 64; ++g) (void)l.p.LegacyScan(g);
  scan = (CpuNow() - scan) / 64;
  std::printf(
      "value=%.3f CPU us per placement (ServersFor, a table lookup), "
      "balanced; legacy %.3f us; legacy scan (before tables) %.1f us\n",
      cb * 1e6, cl * 1e6, scan * 1e6);
  std::printf(
      "value=%.1f ms CPU per Placement::Create (per epoch), balanced, heap "
      "%zu KiB; legacy %.1f ms, %zu KiB\n",
      b.create_cpu_s * 1e3, b.heap / 1024, l.create_cpu_s * 1e3, l.heap / 1024);
  rows.push_back({"CPU per placement (ServersFor)", Fmt("%.3f us", cl * 1e6),
                  Fmt("%.3f us", cb * 1e6), "<= 2 us",
                  "table lookup; the legacy scan it replaced: " +
                      Fmt("%.1f", scan * 1e6) + " us"});
  rows.push_back({"Placement::Create (per epoch)",
                  Fmt("%.1f ms", l.create_cpu_s * 1e3) + ", " +
                      std::to_string(l.heap / 1024) + " KiB",
                  Fmt("%.1f ms", b.create_cpu_s * 1e3) + ", " +
                      std::to_string(b.heap / 1024) + " KiB",
                  "", "CPU time, heap held by the table"});
  const std::string load_end = LoadAvg(",");
  std::printf("load=%s (start %s)\n", load_end.c_str(), load_start.c_str());

  std::ostringstream md;
  md << "| measure | legacy | balanced | goal | detail |\n"
        "|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    md << "| " << r.name << " | " << r.legacy << " | " << r.balanced << " | "
       << r.goal << " | " << r.note << " |\n";
  }
  md << "\n"
     << o.servers << " servers (" << o.per_domain << " per failure domain), "
     << o.stripes << " stripes (files of " << o.stripes_per_file << "), k+m "
     << o.k << "+" << o.m << ", legacy " << Placement::kLegacyPgCount
     << " groups, balanced " << o.groups << " groups; load average "
     << load_start << " at start, " << load_end << " at end.\n";
  std::filesystem::create_directories(o.out);
  std::ofstream(o.out + "/placement.md") << md.str();
  std::ofstream csv(o.out + "/placement.csv");
  csv << "measure,legacy,balanced,goal,detail\n";
  for (const Row& r : rows) {
    csv << '"' << r.name << "\",\"" << r.legacy << "\",\"" << r.balanced
        << "\",\"" << r.goal << "\",\"" << r.note << "\"\n";
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
      "Runs backend/client Placement (legacy and balanced schemes) at "
      "scale: balance, movement on server loss/out/add, cost"};
  app.add_flag("--quick", quick, "10^3 servers and 10^6 stripes");
  app.add_option("--servers", o.servers, "servers (default 10^4)")
      ->check(CLI::Range(8u, 1000000u));
  app.add_option("--stripes", o.stripes, "stripes (default 10^7)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--stripes-per-file", o.stripes_per_file,
                 "stripes per file of the files population (default 64)")
      ->check(CLI::Range(1u, 1u << 30));
  app.add_option("--per-domain", o.per_domain, "servers per failure domain")
      ->check(CLI::Range(1u, 1000000u));
  app.add_option("--groups", o.groups,
                 "placement groups of the balanced map (default: the power "
                 "of two giving >= 128 group-chunks per server, at least "
                 "the map default)")
      ->check(CLI::Range(1u, stripefs::kMaxPlacementGroups));
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
  if (o.groups == 0) {
    o.groups = stripefs::kDefaultPlacementGroups;
    while (uint64_t{o.groups} * (o.k + o.m) < uint64_t{o.servers} * 128 &&
           o.groups < stripefs::kMaxPlacementGroups) {
      o.groups *= 2;
    }
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
