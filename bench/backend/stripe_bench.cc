// Backend write/read cost by access pattern, measured side by side in one
// run on one volume (k+m chunk stores, default 4+2 with 1 MiB cells, i.e.
// 4 MiB stripes):
//   (a) stripe-aligned full-stripe writes,
//   (b) 256 KiB writes inside existing stripes, read-modify-write,
//   (c) the same with parity-delta updates,
//   (d) sequential reads healthy, and with one chunk server down.
// Prints MiB/s (logical bytes) and the ratios to (a) and to the healthy
// read. Chunk stores sync every chunk (as in production), so absolute
// numbers reflect this machine's disk.
//
// Usage: stripe_bench [--dir D] [--mib N] [--cell-kib C] [--k K --m M]
//        stripe_bench --meta HOST:PORT --key FILE [--mib N]   (a cluster,
//        e.g. from `stripefs cluster up --servers 6 --cell-size 1048576`;
//        its geometry applies, --k/--m/--cell-kib are ignored)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/client/volume.h"

namespace {

using stripefs::EmbeddedVolumeOptions;
using stripefs::Status;
using stripefs::Volume;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

[[noreturn]] void Die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "stripe_bench: %s: %s\n", what.c_str(),
               st.ToString().c_str());
  std::exit(1);
}

// Cluster to use instead of an embedded volume (empty: embedded).
std::string g_meta, g_key;

std::unique_ptr<Volume> OpenVolume(const std::string& dir,
                                   const EmbeddedVolumeOptions& o) {
  auto v = g_meta.empty() ? Volume::OpenEmbedded(dir, o)
                          : Volume::ConnectCluster(g_meta, g_key, o.client);
  if (!v.ok()) Die("opening volume", v.status());
  return std::move(v).value();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  uint64_t mib = 256;
  uint32_t cell_kib = 1024, k = 4, m = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--meta")
      g_meta = argv[i + 1];
    else if (a == "--key")
      g_key = argv[i + 1];
    else if (a == "--dir")
      dir = argv[i + 1];
    else if (a == "--mib")
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--cell-kib")
      cell_kib = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (a == "--k")
      k = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (a == "--m")
      m = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr,
                   "usage: stripe_bench [--dir D] [--mib N] [--cell-kib C] "
                   "[--k K] [--m M]\n");
      return 2;
    }
  }
  bool own_dir = dir.empty() && g_meta.empty();
  if (own_dir) {
    char tmpl[] = "/var/tmp/stripefs-bench-XXXXXX";
    dir = mkdtemp(tmpl);
    std::filesystem::remove(dir);
  }
  EmbeddedVolumeOptions o;
  o.geometry = stripefs::Geometry{k, m, cell_kib * 1024};
  o.chunk_reserve_bytes = 0;
  auto vol = OpenVolume(dir, o);
  const uint64_t S = vol->client().stripe_size();
  const uint64_t stripes = std::max<uint64_t>(1, (mib << 20) / S);
  const uint64_t total = stripes * S;
  auto file = vol->meta().MkNode(stripefs::kRootInode,
                                 "stripe_bench." + std::to_string(getpid()),
                                 0100644, 0, 0, 0);
  if (!file.ok()) Die("creating file", file.status());
  const uint64_t ino = file->ino;
  std::vector<uint8_t> buf(S);
  std::mt19937 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());

  const stripefs::Geometry g = vol->geometry();
  std::printf(
      "volume %s: %u+%u, cell %u KiB, stripe %llu MiB, %llu MiB per pass\n",
      vol->description().c_str(), g.k, g.m, g.cell_size >> 10,
      static_cast<unsigned long long>(S >> 20),
      static_cast<unsigned long long>(total >> 20));

  // (a) full-stripe writes.
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t s = 0; s < stripes; ++s) {
    Status st = vol->client().Write(ino, s * S, buf);
    if (!st.ok()) Die("full-stripe write", st);
  }
  const double full = (total >> 20) / Seconds(t0);

  // (b)/(c): 256 KiB writes, one per stripe at a varying cell, same bytes.
  const uint64_t small = 256 * 1024;
  auto small_writes = [&](Volume* v) {
    auto t = std::chrono::steady_clock::now();
    uint64_t bytes = 0;
    for (uint64_t s = 0; s < stripes; ++s) {
      uint64_t off = s * S + (s * small * 5) % S / small * small;
      Status st = v->client().Write(
          ino, off, std::span<const uint8_t>(buf.data(), small));
      if (!st.ok()) Die("256 KiB write", st);
      bytes += small;
    }
    return (bytes / 1048576.0) / Seconds(t);
  };
  vol.reset();
  o.client.parity_delta = false;
  vol = OpenVolume(dir, o);
  const double rmw = small_writes(vol.get());
  auto c_rmw = vol->client().counters();
  vol.reset();
  o.client.parity_delta = true;
  vol = OpenVolume(dir, o);
  const double delta = small_writes(vol.get());
  auto c_delta = vol->client().counters();

  // (d) reads, healthy then with chunk server 0 marked down.
  auto read_all = [&]() {
    auto t = std::chrono::steady_clock::now();
    for (uint64_t s = 0; s < stripes; ++s) {
      auto n = vol->client().Read(ino, s * S, buf, total);
      if (!n.ok()) Die("read", n.status());
    }
    return (total >> 20) / Seconds(t);
  };
  // Alternate healthy and degraded passes (after a warm-up) and keep the
  // medians, so drift in machine load hits both alike.
  // The server taken down: the first one in the cluster map.
  auto map = vol->meta().GetClusterMap();
  if (!map.ok() || map->servers.empty())
    Die("reading the cluster map", map.status());
  const uint32_t down_server = map->servers.front().id;
  auto set_state = [&](stripefs::ServerState state) {
    Status st = vol->meta().SetServerState(down_server, state);
    if (st.ok()) st = vol->client().RefreshClusterMap();
    if (!st.ok()) Die("changing server state", st);
  };
  (void)read_all();
  std::vector<double> healthy, degraded;
  for (int round = 0; round < 5; ++round) {
    healthy.push_back(read_all());
    set_state(stripefs::ServerState::kDown);
    degraded.push_back(read_all());
    set_state(stripefs::ServerState::kUp);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double read_healthy = median(healthy);
  const double read_degraded = median(degraded);
  auto c_read = vol->client().counters();

  std::printf(
      "\n| pattern | MiB/s | ratio | backend work |\n|---|---|---|---|\n");
  std::printf(
      "| (a) full-stripe writes (%llu MiB each) | %.1f | 1.00 | %llu "
      "full-stripe encodes |\n",
      static_cast<unsigned long long>(S >> 20), full,
      static_cast<unsigned long long>(stripes));
  std::printf(
      "| (b) 256 KiB writes, read-modify-write | %.1f | %.3f | %llu RMW "
      "stripes, %.0f MiB read |\n",
      rmw, rmw / full, static_cast<unsigned long long>(c_rmw.rmw_stripes),
      c_rmw.rmw_bytes_read / 1048576.0);
  std::printf(
      "| (c) 256 KiB writes, parity delta | %.1f | %.3f | %llu delta updates, "
      "%llu RMW, %.0f MiB read |\n",
      delta, delta / full,
      static_cast<unsigned long long>(c_delta.parity_delta_updates),
      static_cast<unsigned long long>(c_delta.rmw_stripes),
      c_delta.rmw_bytes_read / 1048576.0);
  std::printf(
      "| (d) sequential read, healthy (median of 5) | %.1f | 1.00 (read) | |\n",
      read_healthy);
  std::printf(
      "| (d) sequential read, 1 server down (median of 5) | %.1f | %.3f (read) "
      "| %llu degraded stripe reads |\n",
      read_degraded, read_degraded / read_healthy,
      static_cast<unsigned long long>(c_read.degraded_reads));
  std::printf(
      "\nunaligned 256 KiB writes are %.1fx slower than full-stripe writes "
      "(RMW), %.1fx with parity delta\n",
      full / rmw, full / delta);
  vol.reset();
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}
