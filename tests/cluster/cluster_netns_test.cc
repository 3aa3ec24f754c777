// The cluster failure tests over hosts as network namespaces (`stripefs
// cluster up --netns`: metad and 7 chunkd each in a namespace of its own,
// on a bridge, 4+2, every link limited with tc tbf). One cluster serves the
// whole fixture; each test leaves every server up and reachable again. A
// partitioned server (its link down, the process running) must behave like
// a hung one: reads go around it, writes go degraded, metad marks it down
// and up again after `heal`. The suite fails if `cluster down` leaves a
// namespace or link behind. Needs root and iproute2: skips loudly without.
// Every wait is a bounded poll on an outcome, never a wall-clock assertion.
#include "tools/cluster_netns.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "backend/client/placement.h"
#include "backend/client/repairer.h"
#include "backend/client/volume.h"
#include "tests/support/cluster_volume_test.h"
#include "tests/support/local_cluster.h"
#include "tests/support/random_bytes.h"
#include "tests/support/run_command.h"

namespace stripefs {
namespace {

using testing::LocalCluster;
using testing::RandomBytes;
using testing::RunCommand;

class ClusterNetnsTest : public testing::VolumeTest {
 protected:
  static constexpr int kServers = 7;

  static void SetUpTestSuite() {
    skip_ = testing::NetnsSkipReason();
    if (!skip_.empty()) return;
    testing::LocalClusterOptions o;
    o.servers = kServers;
    o.netns = true;
    o.link_rate = "10gbit";
    auto c = LocalCluster::Start(o);
    if (!c.ok()) {
      start_error_ = c.status().ToString();
      return;
    }
    cluster_ = std::move(c).value().release();
  }
  static void TearDownTestSuite() {
    if (!cluster_) return;
    const std::string tag = cluster_->netns_tag();
    Status st = cluster_->Down();
    EXPECT_TRUE(st.ok()) << st.ToString();
    delete cluster_;
    cluster_ = nullptr;
    auto list = RunCommand("ip netns list");
    EXPECT_EQ(list.out.find("sfs-" + tag + "-"), std::string::npos)
        << "left behind:\n"
        << list.out;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "netns cluster: " << skip_;
    ASSERT_NE(cluster_, nullptr) << start_error_;
    StripeClientOptions o;
    o.read_deadline = std::chrono::milliseconds(1000);
    auto v = Volume::ConnectCluster(cluster_->meta_address(),
                                    cluster_->key_file(), o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    volume_ = std::move(v).value();
  }
  void TearDown() override {
    volume_.reset();
    if (!cluster_ || !HasFailure()) return;
    // A failed test may leave a server cut off or dead: the next test of
    // the fixture gets every server back.
    for (int id = 1; id <= kServers; ++id) {
      (void)cluster_->Heal(std::to_string(id));
      (void)cluster_->StartServer(id);  // "already running" is fine
    }
  }

  // Repairs every stripe and checks each is back to full redundancy.
  void RepairAll() {
    Repairer repairer(volume_.get());
    auto r = repairer.Run({});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stripes_failed, 0u) << r->first_error;
    auto all = meta().ListStripes(0, 0, 100000);
    ASSERT_TRUE(all.ok());
    for (const auto& ref : *all) EXPECT_EQ(ref.sv.missing_mask, 0u);
  }
  std::string Pid(const std::string& name) {
    auto s = cluster_->ReadFile(name + ".pid");
    return s.substr(0, s.find('\n'));
  }

  static inline LocalCluster* cluster_ = nullptr;
  static inline std::string skip_, start_error_;
};

TEST_F(ClusterNetnsTest, EveryDaemonRunsInItsOwnNamespaceOn198_18) {
  const std::string tag = cluster_->netns_tag();
  ASSERT_EQ(tag.size(), 8u);
  EXPECT_EQ(cluster_->meta_address().rfind("198.1", 0), 0u)
      << cluster_->meta_address();
  for (int id = 0; id <= kServers; ++id) {
    const std::string name = id == 0 ? "metad" : "chunkd." + std::to_string(id);
    const std::string ns =
        "sfs-" + tag + (id == 0 ? "-m" : "-c" + std::to_string(id));
    auto got = RunCommand("ip netns identify " + Pid(name));
    EXPECT_EQ(got.out, ns + "\n") << name;
    auto addr = cluster_->ReadFile(name + ".addr");
    EXPECT_EQ(addr.rfind("198.1", 0), 0u) << name << " at " << addr;
    // Every host link is rate limited at both ends.
    auto inside = RunCommand("tc -n " + ns + " qdisc show dev eth0");
    EXPECT_NE(inside.out.find("tbf"), std::string::npos) << inside.out;
    auto hub = RunCommand("tc -n sfs-" + tag + "-hub qdisc show dev s" + tag +
                          "-" + std::to_string(id));
    EXPECT_NE(hub.out.find("tbf"), std::string::npos) << hub.out;
  }
  // Nothing of the cluster's in our namespace but the client link.
  auto ours = RunCommand("ip -o -4 addr show");
  EXPECT_NE(ours.out.find("s" + tag + "-cl"), std::string::npos);
  auto routes = RunCommand("ip -4 route show");
  EXPECT_EQ(routes.out.find("198.18.0.0/15"), std::string::npos);
}

TEST_F(ClusterNetnsTest, KilledServerIsReadAroundAndRepairedAfterRestart) {
  const uint64_t S = client().stripe_size();
  const uint64_t ino = NewFile("killed");
  auto data = RandomBytes(8 * S, 1);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  ASSERT_TRUE(cluster_->Signal(2, SIGKILL).ok()) << cluster_->Log();
  const uint64_t down = WaitForState(2, ServerState::kDown);
  ASSERT_NE(down, 0u) << cluster_->ReadFile("metad.log");
  ASSERT_TRUE(WaitForClientEpoch(down));
  auto got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  auto more = RandomBytes(8 * S, 2);
  ASSERT_TRUE(client().Write(ino, 0, more).ok());
  ASSERT_TRUE(cluster_->StartServer(2).ok()) << cluster_->Log();
  const uint64_t up = WaitForState(2, ServerState::kUp);
  ASSERT_NE(up, 0u) << cluster_->ReadFile("metad.log");
  ASSERT_TRUE(WaitForClientEpoch(up));
  ASSERT_NO_FATAL_FAILURE(RepairAll());
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);
}

TEST_F(ClusterNetnsTest, PartitionedServerIsHungThenBackAfterHeal) {
  const uint64_t S = client().stripe_size();
  const uint64_t ino = NewFile("partitioned");
  const int stripes = 8;
  auto data = RandomBytes(stripes * S, 3);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  constexpr uint32_t kCut = 3;
  ASSERT_GT(StripesWithDataOn(ino, stripes, kCut), 0)
      << "pick another server: none of the file's data chunks is on it";

  ASSERT_TRUE(cluster_->Partition(std::to_string(kCut)).ok())
      << cluster_->Log();
  // Still running, only unreachable: the map says `up`, so reads reach it
  // and are served by reconstruction once the read deadline passes.
  EXPECT_EQ(::kill(std::stoi(Pid("chunkd." + std::to_string(kCut))), 0), 0);
  const auto before = client().counters();
  auto got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_GT(client().counters().slow_chunk_reads, before.slow_chunk_reads);
  EXPECT_GT(client().counters().degraded_reads, before.degraded_reads);

  const uint64_t down = WaitForState(kCut, ServerState::kDown);
  ASSERT_NE(down, 0u) << "metad never marked the partitioned chunkd down\n"
                      << cluster_->ReadFile("metad.log");
  ASSERT_TRUE(WaitForClientEpoch(down));
  // Writes go on, degraded (the cut server's chunks are missing).
  auto more = RandomBytes(stripes * S, 4);
  ASSERT_TRUE(client().Write(ino, 0, more).ok());
  auto stripes_now = meta().ListStripes(ino, 0, 1000);
  ASSERT_TRUE(stripes_now.ok());
  int degraded = 0;
  for (const auto& ref : *stripes_now) degraded += ref.sv.missing_mask != 0;
  EXPECT_GT(degraded, 0) << "no stripe was written degraded";
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);

  ASSERT_TRUE(cluster_->Heal(std::to_string(kCut)).ok()) << cluster_->Log();
  const uint64_t up = WaitForState(kCut, ServerState::kUp);
  ASSERT_NE(up, 0u) << cluster_->ReadFile("metad.log");
  EXPECT_GT(up, down);
  ASSERT_TRUE(WaitForClientEpoch(up));
  ASSERT_NO_FATAL_FAILURE(RepairAll());
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);
}

// (A loopback cluster's refusal: ClusterProcessTest.UpServeKillRestartDown.)
TEST_F(ClusterNetnsTest, PartitionNeedsAKnownServer) {
  EXPECT_NE(
      cluster_->Cli("cluster partition --server 99 --dir " + cluster_->dir()),
      0);
  EXPECT_NE(cluster_->Log().find("expected metad or a chunkd id 1..7"),
            std::string::npos)
      << cluster_->Log();
}

// Without a shared cluster: `up` that fails after making its network, and
// `up` killed midway, leave nothing once `down` ran.
class ClusterNetnsSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::NetnsSkipReason();
    if (!why.empty()) GTEST_SKIP() << "netns cluster: " << why;
    char tmpl[] = "/tmp/stripefs-netns-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    (void)Cli("cluster down --grace 2");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  testing::CommandOutput Cli(const std::string& args) {
    return RunCommand(std::string(STRIPEFS_BINARY) + " " + args + " --dir " +
                      dir_ + " 2>&1");
  }
  std::string Tag() {
    std::ifstream f(dir_ + "/netns.state");
    std::string word, tag;
    f >> word >> tag;
    return tag;
  }
  static std::string Namespaces() { return RunCommand("ip netns list").out; }

  std::string dir_;
};

TEST_F(ClusterNetnsSetupTest, FailedUpUndoesItsNetwork) {
  // chunkd 1's store directory is a file: its start fails after the
  // network was made.
  { std::ofstream(dir_ + "/chunkd.1") << "not a directory\n"; }
  // Only this cluster's namespaces: other tests on the machine may make
  // and remove theirs meanwhile.
  const std::string mine =
      "sfs-" + tools::NetnsTag(std::filesystem::absolute(dir_).string()) + "-";
  EXPECT_EQ(Namespaces().find(mine), std::string::npos) << Namespaces();
  auto up = Cli("cluster up --netns --servers 3 --k 2 --m 1 --timeout 20");
  EXPECT_NE(up.rc, 0) << up.out;
  EXPECT_NE(up.out.find("chunkd.1"), std::string::npos) << up.out;
  EXPECT_EQ(up.out.find("undoing the network"), std::string::npos) << up.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/netns.state"));
  EXPECT_EQ(Namespaces().find(mine), std::string::npos) << Namespaces();
  auto down = Cli("cluster down");
  EXPECT_EQ(down.rc, 0) << down.out;
}

TEST_F(ClusterNetnsSetupTest, DownAfterAKilledUpRemovesEverything) {
  auto up = RunCommand(std::string("( ") + STRIPEFS_BINARY +
                       " cluster up --netns --servers 12 --k 2 --m 1 --dir " +
                       dir_ + " >/dev/null 2>&1 & echo $! )");
  const std::string pid = up.out.substr(0, up.out.find('\n'));
  // Kill it once the network is partly made (bounded poll on the state).
  for (int i = 0; i < 600; ++i) {
    std::ifstream f(dir_ + "/netns.state");
    std::string all((std::istreambuf_iterator<char>(f)), {});
    if (all.find("-c3\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  RunCommand("kill -9 " + pid);
  const std::string tag = Tag();
  ASSERT_EQ(tag.size(), 8u);
  // The tag FailedUpUndoesItsNetwork computes for its own check.
  EXPECT_EQ(tag, tools::NetnsTag(std::filesystem::absolute(dir_).string()));
  // Reap-free wait: the shell's child is gone once kill -0 fails.
  for (int i = 0; i < 500 && RunCommand("kill -0 " + pid).rc == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto down = Cli("cluster down --grace 2");
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_EQ(Namespaces().find("sfs-" + tag + "-"), std::string::npos)
      << Namespaces();
  EXPECT_FALSE(std::filesystem::exists("/sys/class/net/s" + tag + "-cl"));
  auto again = Cli("cluster down --grace 2");  // idempotent
  EXPECT_EQ(again.rc, 0) << again.out;
}

TEST_F(ClusterNetnsSetupTest, NetemRunsOrFailsLoudlyWithoutTheQdisc) {
  auto up =
      Cli("cluster up --netns --servers 3 --k 2 --m 1 --netem 'delay 1ms'");
  if (up.rc != 0) {
    ASSERT_NE(up.out.find("no netem qdisc"), std::string::npos) << up.out;
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/netns.state"));
    GTEST_SKIP() << "this kernel has no netem qdisc (sch_netem); `cluster "
                    "up --netem` failed cleanly with: "
                 << up.out.substr(0, up.out.find('\n'));
  }
  const std::string tag = Tag();
  auto q =
      RunCommand("tc -n sfs-" + tag + "-hub qdisc show dev s" + tag + "-1");
  EXPECT_NE(q.out.find("netem"), std::string::npos) << q.out;
  auto down = Cli("cluster down --grace 2");
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_EQ(Namespaces().find("sfs-" + tag + "-"), std::string::npos);
}

// --listen is checked when the command line is parsed (no root needed).
TEST(DaemonListenTest, BadAddressIsOneLineNamingTheFix) {
  for (const char* bad : {"[::1]:7000", "host:", "198.18.0.1:70000"}) {
    auto got = RunCommand(std::string(STRIPEFS_BINARY) +
                          " metad --dir /nonexistent --key /nonexistent "
                          "--listen '" +
                          bad + "' 2>&1");
    EXPECT_NE(got.rc, 0) << bad;
    EXPECT_NE(got.out.find("give IPv4 HOST:PORT"), std::string::npos)
        << got.out;
    EXPECT_EQ(got.out.find('\n'), got.out.size() - 1) << got.out;
  }
}

}  // namespace
}  // namespace stripefs
