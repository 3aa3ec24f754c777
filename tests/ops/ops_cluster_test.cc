// Operations against one real local cluster (`stripefs cluster up`: metad +
// 6 chunkd on loopback, 4+2) and one mount of it started with
// `stripefs mount --metrics 127.0.0.1:0`, shared by every test:
//   * every endpoint in metrics.addrs and the mount's serves the text
//     format with the documented names, and the counters move after I/O;
//   * `stripefs status` says HEALTH_OK, names a killed chunkd in
//     HEALTH_WARN, and --json parses.
//   * mounts and repairs heartbeat metad: status counts mounts (2 -> 1
//     after an unmount), shows a repair's progress, and a repair after a
//     killed server ends with no degraded stripe.
// Waits are bounded polls on the outcome, never time assertions.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/rpc/client_lease.h"
#include "metrics/scrape.h"
#include "tests/fs/fs_mount.h"

namespace stripefs {
namespace {

namespace sfs = std::filesystem;
using metrics::Exposition;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Sum of the series of `name` whose labels contain `needle`.
double SumWhere(const Exposition& e, const std::string& name,
                const std::string& needle) {
  double sum = 0;
  for (const auto& [key, v] : e.series) {
    if (key.rfind(name + "{", 0) == 0 && key.find(needle) != std::string::npos)
      sum += v;
  }
  return sum;
}

class OpsClusterTest : public ::testing::Test {
 public:
  static constexpr int kServers = 6;

  static void SetUpTestSuite() {
    skip_ = fs::testing::BackendSkipMessage(fs::testing::FsBackend::kCluster);
    if (!skip_.empty()) return;
    char tmpl[] = "/tmp/stripefs-ops-XXXXXX";
    dir_ = mkdtemp(tmpl);
    mnt_ = dir_ + "/mnt";
    sfs::create_directories(mnt_);
    if (Cli("cluster up --servers " + std::to_string(kServers) +
            " --cell-size 65536 --dir " + dir_) != 0) {
      setup_error_ = "cluster up failed:\n" + Slurp(dir_ + "/cli.log");
      return;
    }
    std::getline(std::ifstream(dir_ + "/metad.addr"), meta_);
    if (Cli("mount --meta " + meta_ + " --key " + dir_ +
            "/cluster.key --metrics 127.0.0.1:0 " + mnt_) != 0) {
      setup_error_ = "mount failed:\n" + Slurp(dir_ + "/cli.log");
      return;
    }
    mounted_ = true;
    std::string log = Slurp(dir_ + "/cli.log");
    const std::string tag = "metrics on http://";
    auto at = log.rfind(tag);
    if (at == std::string::npos) {
      setup_error_ = "the mount did not report its metrics address:\n" + log;
      return;
    }
    auto end = log.find("/metrics", at + tag.size());
    mount_metrics_ = log.substr(at + tag.size(), end - at - tag.size());
  }

  static void TearDownTestSuite() {
    if (dir_.empty()) return;
    if (mounted_ && Cli("umount " + mnt_) != 0)
      ::umount2(mnt_.c_str(), MNT_DETACH);
    Cli("cluster down --grace 3 --dir " + dir_);
    std::error_code ec;
    sfs::remove_all(dir_, ec);
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  static int Cli(const std::string& args, std::string* out = nullptr) {
    std::string file = dir_ + (out ? "/cli.out" : "/cli.log");
    std::string cmd = std::string(STRIPEFS_BINARY) + " " + args +
                      (out ? " >" + file + " 2>>" + dir_ + "/cli.log"
                           : " >>" + file + " 2>&1");
    int rc = std::system(cmd.c_str());
    if (out) *out = Slurp(file);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  static std::vector<std::string> DaemonMetricsAddrs() {
    std::vector<std::string> out;
    std::ifstream f(dir_ + "/metrics.addrs");
    for (std::string l; std::getline(f, l);)
      if (!l.empty()) out.push_back(l);
    return out;
  }

  static Exposition ScrapeOk(const std::string& addr) {
    auto text = metrics::Scrape(addr);
    EXPECT_TRUE(text.ok()) << addr << ": " << text.status().ToString();
    if (!text.ok()) return {};
    Exposition e = metrics::ParseExposition(*text);
    EXPECT_EQ(e.bad_lines, 0u) << addr;
    return e;
  }

  // Sum of `name` over every chunkd.
  static double ChunkdSum(const std::string& name, const std::string& needle) {
    auto addrs = DaemonMetricsAddrs();
    double sum = 0;
    for (size_t i = 1; i < addrs.size(); ++i)
      sum += SumWhere(ScrapeOk(addrs[i]), name, needle);
    return sum;
  }

  static inline std::string skip_, setup_error_, dir_, mnt_, meta_,
      mount_metrics_;
  static inline bool mounted_ = false;
};

TEST_F(OpsClusterTest, EveryDaemonAndTheMountServeTheirMetrics) {
  auto addrs = DaemonMetricsAddrs();
  ASSERT_EQ(addrs.size(), 1u + kServers) << Slurp(dir_ + "/metrics.addrs");
  // The mount's first heartbeat is sent by its lease thread after the
  // mount command returns: scrape until metad counts it (bounded).
  Exposition metad = ScrapeOk(addrs[0]);
  for (int i = 0;
       i < 100 && SumWhere(metad, "stripefs_clients", "kind=\"mount\"") != 1;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    metad = ScrapeOk(addrs[0]);
  }
  for (const char* name :
       {"stripefs_server_state", "stripefs_cluster_servers",
        "stripefs_cluster_map_epoch", "stripefs_volume_inodes",
        "stripefs_rpc_requests_total", "stripefs_rpc_open_connections",
        "stripefs_rpc_rejected_frames_total",
        "stripefs_rpc_request_duration_seconds_bucket", "stripefs_clients"})
    EXPECT_TRUE(metad.Has(name)) << "metad lacks " << name;
  EXPECT_EQ(SumWhere(metad, "stripefs_clients", "kind=\"mount\""), 1);
  // The mount's reads (GetGeometry, GetAttr of the root ...) ran inline.
  EXPECT_GT(
      SumWhere(metad, "stripefs_rpc_inline_requests_total", "role=\"metad\""),
      0);
  EXPECT_EQ(SumWhere(metad, "stripefs_cluster_servers", "state=\"up\""),
            kServers);
  for (int id = 1; id <= kServers; ++id) {
    Exposition c = ScrapeOk(addrs[static_cast<size_t>(id)]);
    for (const char* name :
         {"stripefs_chunk_store_bytes_capacity", "stripefs_chunk_store_chunks",
          "stripefs_chunk_store_writes_total", "stripefs_rpc_requests_total",
          "stripefs_chunk_engine_commit_batches_total",
          "stripefs_chunk_engine_index_syncs_total",
          "stripefs_chunk_engine_version_cache_bytes",
          "stripefs_chunk_engine_batch_seconds_total",
          "stripefs_chunk_engine_index_sync_seconds_total"})
      EXPECT_TRUE(c.Has(name)) << "chunkd " << id << " lacks " << name;
    EXPECT_GT(SumWhere(c, "stripefs_chunk_store_bytes_capacity",
                       "server=\"" + std::to_string(id) + "\""),
              0);
  }
  EXPECT_FALSE(sfs::exists(mnt_ + "/absent"));  // a LOOKUP for the histogram
  Exposition m = ScrapeOk(mount_metrics_);
  for (const char* name :
       {"stripefs_mount_writes_requests_total",
        "stripefs_mount_backend_stripe_writes_total",
        "stripefs_mount_backend_degraded_reads_total",
        "stripefs_mount_coalescing_buffered_bytes", "stripefs_mount_volume_k",
        "stripefs_fuse_requests_total", "stripefs_fuse_queue_requests_total",
        "stripefs_fuse_request_duration_seconds_count"})
    EXPECT_TRUE(m.Has(name)) << "the mount lacks " << name;
}

TEST_F(OpsClusterTest, CountersMoveAfterIo) {
  auto addrs = DaemonMetricsAddrs();
  ASSERT_FALSE(addrs.empty());
  Exposition m0 = ScrapeOk(mount_metrics_);
  Exposition meta0 = ScrapeOk(addrs[0]);
  double chunk_writes0 = ChunkdSum("stripefs_chunk_store_writes_total", "");
  double commits0 = ChunkdSum("stripefs_chunk_engine_commit_batches_total", "");
  double syncs0 = ChunkdSum("stripefs_chunk_engine_index_syncs_total", "");
  double batch_s0 = ChunkdSum("stripefs_chunk_engine_batch_seconds_total", "");
  double chunk_rpcs0 = ChunkdSum("stripefs_rpc_request_duration_seconds_count",
                                 "op=\"WriteChunk\"");
  {
    std::vector<char> data(2 << 20, 'x');
    std::ofstream f(mnt_ + "/io-" + std::to_string(::getpid()),
                    std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    ASSERT_TRUE(f.good());
  }
  ::sync();
  Exposition m1 = ScrapeOk(mount_metrics_);
  Exposition meta1 = ScrapeOk(addrs[0]);
  EXPECT_GT(m1.Sum("stripefs_mount_writes_requests_total"),
            m0.Sum("stripefs_mount_writes_requests_total"));
  EXPECT_GT(m1.Sum("stripefs_mount_backend_bytes_written_total"),
            m0.Sum("stripefs_mount_backend_bytes_written_total"));
  EXPECT_GT(SumWhere(m1, "stripefs_fuse_request_duration_seconds_count",
                     "op=\"WRITE\""),
            SumWhere(m0, "stripefs_fuse_request_duration_seconds_count",
                     "op=\"WRITE\""));
  EXPECT_GT(SumWhere(meta1, "stripefs_rpc_request_duration_seconds_count",
                     "op=\"Commit"),
            SumWhere(meta0, "stripefs_rpc_request_duration_seconds_count",
                     "op=\"Commit"));
  EXPECT_GT(ChunkdSum("stripefs_chunk_store_writes_total", ""), chunk_writes0);
  EXPECT_GT(ChunkdSum("stripefs_chunk_engine_commit_batches_total", ""),
            commits0);
  EXPECT_GT(ChunkdSum("stripefs_chunk_engine_index_syncs_total", ""), syncs0);
  // The commits' time is counted too (where a write's time goes).
  EXPECT_GT(ChunkdSum("stripefs_chunk_engine_batch_seconds_total", ""),
            batch_s0);
  EXPECT_GT(ChunkdSum("stripefs_rpc_request_duration_seconds_count",
                      "op=\"WriteChunk\""),
            chunk_rpcs0);
}

// Every stripefs_* name in the Grafana dashboard is one some endpoint
// serves: a series, or a family declared by "# TYPE" (an errno map with no
// errors yet has no series).
TEST_F(OpsClusterTest, DashboardUsesExportedNames) {
  std::set<std::string> served;
  auto addrs = DaemonMetricsAddrs();
  addrs.push_back(mount_metrics_);
  for (const auto& a : addrs) {
    auto text = metrics::Scrape(a);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    for (const auto& [key, v] : metrics::ParseExposition(*text).series)
      served.insert(key.substr(0, key.find('{')));
    std::istringstream lines(*text);
    for (std::string l; std::getline(lines, l);)
      if (l.rfind("# TYPE ", 0) == 0)
        served.insert(l.substr(7, l.find(' ', 7) - 7));
  }
  std::string dash = Slurp(std::string(STRIPEFS_SOURCE_DIR) +
                           "/docs/grafana/stripefs-dashboard.json");
  ASSERT_FALSE(dash.empty());
  std::regex name("stripefs_[a-z0-9_]+");
  int checked = 0;
  for (auto it = std::sregex_iterator(dash.begin(), dash.end(), name);
       it != std::sregex_iterator(); ++it, ++checked)
    EXPECT_TRUE(served.count(it->str())) << it->str() << " is not exported";
  EXPECT_GT(checked, 10);
}

TEST_F(OpsClusterTest, StatusSaysHealthOkOnAHealthyCluster) {
  std::string out;
  EXPECT_EQ(Cli("status --dir " + dir_, &out), 0) << out;
  EXPECT_NE(out.find("health: HEALTH_OK"), std::string::npos) << out;
  EXPECT_NE(out.find("6 servers: 6 up, 0 down, 0 out"), std::string::npos)
      << out;
  // The mount holds at least one connection to metad.
  EXPECT_EQ(out.find("clients: 0 "), std::string::npos) << out;
  EXPECT_EQ(out.find("clients: unknown"), std::string::npos) << out;
}

TEST_F(OpsClusterTest, StatusJsonParses) {
  std::string out;
  Cli("status --json --dir " + dir_, &out);
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["health"]["status"], "HEALTH_OK") << out;
  EXPECT_EQ(j["servers"].size(), static_cast<size_t>(kServers));
  EXPECT_EQ(j["geometry"]["k"], 4);
  EXPECT_GT(j["capacity"]["raw_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(j["clients"]["connections"].get<uint64_t>(), 1u);
  EXPECT_EQ(j["stripes"]["degraded"], 0);
}

TEST_F(OpsClusterTest, KilledChunkdGivesWarnNamingIt) {
  ASSERT_EQ(Cli("cluster kill --server 3 --dir " + dir_), 0);
  std::string out;
  int rc = Cli("status --dir " + dir_, &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("health: HEALTH_WARN"), std::string::npos) << out;
  EXPECT_NE(out.find("chunkd 3 ("), std::string::npos) << out;
  // metad's health monitor marks it down (bounded poll); the warning then
  // says so, and the JSON names it too.
  bool down = false;
  for (int i = 0; i < 60 && !down; ++i) {
    Cli("status --json --dir " + dir_, &out);
    auto j = nlohmann::json::parse(out, nullptr, false);
    for (const auto& c : j["health"]["checks"]) {
      std::string check = c.get<std::string>();
      down |= check.rfind("chunkd 3 (", 0) == 0 && check.ends_with(") is down");
    }
    if (!down) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(down) << out;
  // Leave the cluster healthy again.
  ASSERT_EQ(Cli("cluster start --server 3 --dir " + dir_), 0);
  rc = -1;
  for (int i = 0; i < 60 && rc != 0; ++i) {
    rc = Cli("status --dir " + dir_, &out);
    if (rc != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(rc, 0) << out;
}

// `status --json` until `done(json)` holds (bounded); the last document.
nlohmann::json StatusJsonUntil(
    const std::function<bool(const nlohmann::json&)>& done, int tries = 60) {
  nlohmann::json j;
  for (int i = 0; i < tries; ++i) {
    std::string out;
    OpsClusterTest::Cli("status --json --dir " + OpsClusterTest::dir_, &out);
    j = nlohmann::json::parse(out, nullptr, false);
    if (!j.is_discarded() && done(j)) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return j;
}

uint64_t Mounts(const nlohmann::json& j) {
  const auto& m = j["clients"]["mounts"];
  return m.is_number() ? m.get<uint64_t>() : 0;
}

// Mounts heartbeat metad (backend/rpc/client_lease.h): a second mount is
// counted, and an unmounted one leaves the count.
TEST_F(OpsClusterTest, StatusCountsMountsAndForgetsAnUnmountedOne) {
  auto j = StatusJsonUntil([](const auto& j) { return Mounts(j) == 1; });
  ASSERT_EQ(Mounts(j), 1u) << j.dump(2);
  const std::string mnt2 = dir_ + "/mnt2";
  sfs::create_directories(mnt2);
  ASSERT_EQ(
      Cli("mount --meta " + meta_ + " --key " + dir_ + "/cluster.key " + mnt2),
      0)
      << Slurp(dir_ + "/cli.log");
  j = StatusJsonUntil([](const auto& j) { return Mounts(j) == 2; });
  EXPECT_EQ(Mounts(j), 2u) << j.dump(2);
  std::string out;
  Cli("status --dir " + dir_, &out);
  EXPECT_NE(out.find("clients: 2 mounts"), std::string::npos) << out;
  if (Cli("umount " + mnt2) != 0) ::umount2(mnt2.c_str(), MNT_DETACH);
  j = StatusJsonUntil([](const auto& j) { return Mounts(j) == 1; });
  EXPECT_EQ(Mounts(j), 1u) << j.dump(2);
}

// A running repair's progress as metad holds it: a ClientLease with a known
// report (what `stripefs repair` sends) shows on the status screen with its
// rate and ETA, and as the last repair once it finishes.
TEST_F(OpsClusterTest, StatusShowsRepairProgressAndEta) {
  auto key = rpc::ClusterKey::Load(dir_ + "/cluster.key");
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  {
    rpc::ClientLease lease(meta_, *key, "scrub", "test volume");
    rpc::RepairReport p;
    p.stripes_total = 100;
    p.stripes_seen = 40;
    p.stripes_repaired = 3;
    p.stripes_failed = 2;
    p.stripes_unreachable = 1;
    p.bytes_rebuilt = 4 << 20;
    p.elapsed_ms = 4000;
    lease.Update(p);
    std::string out;
    bool shown = false;
    for (int i = 0; i < 40 && !shown; ++i) {  // the next heartbeat carries it
      Cli("status --dir " + dir_, &out);
      shown = out.find("40/100 stripes checked") != std::string::npos;
      if (!shown) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_TRUE(shown) << out;
    EXPECT_NE(out.find("scrub running ("), std::string::npos) << out;
    EXPECT_NE(out.find("3 repaired, 2 FAILED (1 only for servers down), "
                       "4.0 MiB rebuilt in 4.0 s (1.0 MiB/s), ETA 6 s"),
              std::string::npos)
        << out;
  }
  std::string out;
  Cli("status --dir " + dir_, &out);
  EXPECT_NE(out.find("last scrub: 40/100 stripes checked"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("scrub running"), std::string::npos) << out;
  nlohmann::json j = StatusJsonUntil([](const auto&) { return true; });
  const nlohmann::json* scrub = nullptr;
  for (const auto& r : j["clients"]["repairs"])
    if (r["kind"] == "scrub" && r["stripes_checked"] == 40) scrub = &r;
  ASSERT_NE(scrub, nullptr) << j.dump(2);
  EXPECT_EQ((*scrub)["stripes_failed"], 2) << j.dump(2);
  EXPECT_EQ((*scrub)["stripes_unreachable"], 1) << j.dump(2);
}

// Kill a chunk server, write while it is down (stripes are written
// degraded): `stripefs repair` cannot fix them yet and exits 2 saying so.
// Bring it back: status counts the degraded stripes; `stripefs repair`
// reports to metad, and status then shows its final tally and no degraded
// stripe.
TEST_F(OpsClusterTest, RepairAfterAKilledServerEndsWithNoDegradedStripes) {
  ASSERT_EQ(Cli("cluster kill --server 2 --dir " + dir_), 0);
  auto server2 = [](const nlohmann::json& j, const char* state, bool answers) {
    for (const auto& s : j["servers"])
      if (s["id"] == 2) return s["state"] == state && s["answers"] == answers;
    return false;
  };
  auto j =
      StatusJsonUntil([&](const auto& j) { return server2(j, "down", false); });
  ASSERT_TRUE(server2(j, "down", false)) << j.dump(2);
  {
    std::vector<char> data(3 << 20, 'd');
    std::ofstream f(mnt_ + "/degraded", std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.close();
    ASSERT_TRUE(f.good());
  }
  ::sync();
  {
    // While server 2 is down, repair cannot restore those stripes: it
    // counts them, says why, and exits 2 instead of reporting 0 failed.
    std::string out;
    EXPECT_EQ(
        Cli("repair --meta " + meta_ + " --key " + dir_ + "/cluster.key", &out),
        2)
        << out << Slurp(dir_ + "/cli.log");
    EXPECT_EQ(out.find(" 0 failed"), std::string::npos) << out;
    EXPECT_NE(out.find("still degraded"), std::string::npos) << out;
    EXPECT_NE(Slurp(dir_ + "/cli.log").find("could not be repaired"),
              std::string::npos);
  }
  ASSERT_EQ(Cli("cluster start --server 2 --dir " + dir_), 0);
  j = StatusJsonUntil([&](const auto& j) { return server2(j, "up", true); });
  ASSERT_TRUE(server2(j, "up", true)) << j.dump(2);
  const uint64_t degraded = j["stripes"]["degraded"].get<uint64_t>();
  EXPECT_GT(degraded, 0u) << j.dump(2);
  EXPECT_EQ(j["health"]["status"], "HEALTH_WARN") << j.dump(2);

  std::string out;
  ASSERT_EQ(
      Cli("repair --meta " + meta_ + " --key " + dir_ + "/cluster.key", &out),
      0)
      << out << Slurp(dir_ + "/cli.log");
  j = StatusJsonUntil(
      [](const auto& j) { return j["stripes"]["degraded"] == 0; });
  EXPECT_EQ(j["stripes"]["degraded"], 0) << j.dump(2);
  EXPECT_EQ(j["health"]["status"], "HEALTH_OK") << j.dump(2);
  const nlohmann::json* last = nullptr;
  for (const auto& r : j["clients"]["repairs"])
    if (r["kind"] == "repair") last = &r;
  ASSERT_NE(last, nullptr) << j.dump(2);
  EXPECT_EQ((*last)["running"], false);
  EXPECT_EQ((*last)["stripes_repaired"].get<uint64_t>(), degraded) << out;
  EXPECT_EQ((*last)["stripes_failed"], 0);
  EXPECT_GT((*last)["bytes_rebuilt"].get<uint64_t>(), 0u);
  Cli("status --dir " + dir_, &out);
  EXPECT_NE(out.find("last repair: "), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(degraded) + " repaired"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace stripefs
