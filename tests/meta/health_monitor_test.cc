// HealthMonitor state machine: a fake prober decides which servers answer;
// rounds are run by hand (RunRound), so nothing depends on timing.
#include "backend/meta/health_monitor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "backend/meta/meta_store.h"

namespace stripefs {
namespace {

namespace fs = std::filesystem;

class FakeProber : public ServerProber {
 public:
  Status Probe(const ServerInfo& info,
               std::chrono::milliseconds timeout) override {
    std::function<void(const ServerInfo&)> hook;
    {
      std::lock_guard<std::mutex> lock(mu);
      calls[info.id]++;
      last_timeout = timeout;
      hook = on_probe;
    }
    if (hook) hook(info);
    std::lock_guard<std::mutex> lock(mu);
    if (dead.count(info.id)) {
      return Status(ETIMEDOUT, "injected: no answer from " + info.address);
    }
    return Status::Ok();
  }
  void SetDead(uint32_t id, bool is_dead) {
    std::lock_guard<std::mutex> lock(mu);
    if (is_dead) {
      dead[id] = true;
    } else {
      dead.erase(id);
    }
  }
  int Calls(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu);
    return calls[id];
  }

  std::mutex mu;
  std::map<uint32_t, bool> dead;
  std::map<uint32_t, int> calls;
  std::chrono::milliseconds last_timeout{0};
  std::function<void(const ServerInfo&)> on_probe;
};

class HealthMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs-health-XXXXXX";
    dir_ = mkdtemp(tmpl);
    MetaStoreOptions mo;
    mo.sync = false;
    auto s = MetaStore::Create(dir_ + "/meta", Geometry{2, 1, 4096}, mo);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    for (uint32_t id = 1; id <= 3; ++id) {
      ServerInfo info;
      info.id = id;
      info.address = "127.0.0.1:" + std::to_string(7000 + id);
      info.failure_domain = "d" + std::to_string(id);
      ASSERT_TRUE(store_->UpsertServer(info).ok());
    }
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::unique_ptr<HealthMonitor> Monitor(uint32_t down_after,
                                         uint32_t up_after) {
    HealthMonitorOptions o;
    o.down_after = down_after;
    o.up_after = up_after;
    o.probe_timeout = std::chrono::milliseconds(123);
    return std::make_unique<HealthMonitor>(
        store_.get(), &prober_, o,
        [this](const std::string& line) { log_.push_back(line); });
  }
  ServerState State(uint32_t id) {
    auto map = store_->GetClusterMap();
    for (const auto& s : map->servers)
      if (s.id == id) return s.state;
    ADD_FAILURE() << "server " << id << " not in map";
    return ServerState::kOut;
  }
  uint64_t Epoch() { return store_->GetClusterMap()->epoch; }

  std::string dir_;
  std::unique_ptr<MetaStore> store_;
  FakeProber prober_;
  std::vector<std::string> log_;
};

TEST_F(HealthMonitorTest, DownAfterConsecutiveMissesUpAfterAnswers) {
  auto m = Monitor(3, 2);
  const uint64_t e0 = Epoch();
  prober_.SetDead(2, true);
  ASSERT_TRUE(m->RunRound().ok());
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(2), ServerState::kUp) << "2 misses < down_after";
  EXPECT_EQ(Epoch(), e0) << "no change, no epoch bump";
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(2), ServerState::kDown);
  EXPECT_EQ(Epoch(), e0 + 1);
  EXPECT_EQ(State(1), ServerState::kUp);
  EXPECT_EQ(State(3), ServerState::kUp);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("chunkd 2 at 127.0.0.1:7002 missed 3 probes"),
            std::string::npos)
      << log_[0];
  EXPECT_NE(log_[0].find("marked down"), std::string::npos) << log_[0];
  // Still dead: stays down, no further epoch bumps.
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(Epoch(), e0 + 1);

  prober_.SetDead(2, false);
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(2), ServerState::kDown) << "1 answer < up_after";
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(2), ServerState::kUp);
  EXPECT_EQ(Epoch(), e0 + 2);
  auto c = m->counters();
  EXPECT_EQ(c.rounds, 6u);
  EXPECT_EQ(c.marked_down, 1u);
  EXPECT_EQ(c.marked_up, 1u);
  EXPECT_EQ(c.misses, 4u);
  EXPECT_EQ(prober_.last_timeout, std::chrono::milliseconds(123));
}

TEST_F(HealthMonitorTest, AnAnswerResetsTheMissStreak) {
  auto m = Monitor(3, 1);
  for (bool dead : {true, true, false, true, true, false, true, true}) {
    prober_.SetDead(1, dead);
    ASSERT_TRUE(m->RunRound().ok());
    EXPECT_EQ(State(1), ServerState::kUp);
  }
  prober_.SetDead(1, true);
  ASSERT_TRUE(m->RunRound().ok());
  ASSERT_TRUE(m->RunRound().ok());
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(1), ServerState::kDown);
  auto snap = m->Snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[0].id, 1u);
  EXPECT_EQ(snap[0].state, ServerState::kDown);
  EXPECT_GE(snap[0].misses, 3u);
  EXPECT_NE(snap[0].last_error.find("injected"), std::string::npos);
}

TEST_F(HealthMonitorTest, OutServersAreNeverProbedNorChanged) {
  ASSERT_TRUE(store_->SetServerState(3, ServerState::kOut).ok());
  auto m = Monitor(1, 1);
  prober_.SetDead(3, true);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(3), ServerState::kOut);
  EXPECT_EQ(prober_.Calls(3), 0);
  // A down server that answers is marked up; out is never touched even
  // when it answers.
  prober_.SetDead(3, false);
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(3), ServerState::kOut);
}

TEST_F(HealthMonitorTest, DownServersAreProbedAndComeBackUp) {
  // chunkd marks itself down on a clean stop; when it runs again at the
  // same address without re-registering, the monitor brings it back.
  ASSERT_TRUE(store_->SetServerState(1, ServerState::kDown).ok());
  auto m = Monitor(3, 1);
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(1), ServerState::kUp);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_NE(log_[0].find("answers again"), std::string::npos) << log_[0];
}

TEST_F(HealthMonitorTest, AnOperatorChangeDuringARoundWins) {
  auto m = Monitor(1, 1);
  prober_.SetDead(2, true);
  // The operator marks server 2 out while its probe is running.
  prober_.on_probe = [&](const ServerInfo& info) {
    if (info.id == 2) (void)store_->SetServerState(2, ServerState::kOut);
  };
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(2), ServerState::kOut) << "the monitor must not override out";
  EXPECT_EQ(m->counters().marked_down, 0u);
}

TEST_F(HealthMonitorTest, AReRegistrationDuringARoundWinsAndResetsCounts) {
  auto m = Monitor(2, 1);
  prober_.SetDead(1, true);
  ASSERT_TRUE(m->RunRound().ok());  // 1 miss
  // Server 1 restarts at a new address while the next probe (of the old
  // address) times out.
  prober_.on_probe = [&](const ServerInfo& info) {
    if (info.id != 1 || info.address != "127.0.0.1:7001") return;
    ServerInfo moved = info;
    moved.address = "127.0.0.1:7101";
    (void)store_->UpsertServer(moved);
  };
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(1), ServerState::kUp) << "entry changed: no down mark";
  prober_.on_probe = nullptr;
  // The new address is probed from a clean slate: one miss is not enough.
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(1), ServerState::kUp);
  auto snap = m->Snapshot();
  EXPECT_EQ(snap[0].address, "127.0.0.1:7101");
  EXPECT_EQ(snap[0].misses, 1u);
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(State(1), ServerState::kDown);
}

TEST_F(HealthMonitorTest, ServersWithoutAddressAreNotProbed) {
  ServerInfo embedded;
  embedded.id = 9;
  embedded.failure_domain = "disk9";
  ASSERT_TRUE(store_->UpsertServer(embedded).ok());
  auto m = Monitor(1, 1);
  ASSERT_TRUE(m->RunRound().ok());
  EXPECT_EQ(prober_.Calls(9), 0);
  EXPECT_EQ(State(9), ServerState::kUp);
}

TEST_F(HealthMonitorTest, BackgroundThreadMarksDownAndStops) {
  HealthMonitorOptions o;
  o.interval = std::chrono::milliseconds(5);
  o.down_after = 2;
  HealthMonitor m(store_.get(), &prober_, o, [](const std::string&) {});
  prober_.SetDead(3, true);
  m.Start();
  // Bounded poll: 2000 x 5 ms; only the outcome is checked.
  for (int i = 0; i < 2000 && State(3) != ServerState::kDown; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  m.Stop();
  EXPECT_EQ(State(3), ServerState::kDown);
  EXPECT_GE(m.counters().rounds, 2u);
  const uint64_t rounds = m.counters().rounds;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(m.counters().rounds, rounds) << "no rounds after Stop()";
}

TEST(HealthMonitorOptionsTest, NonsenseIsRejectedNamingTheOption) {
  HealthMonitorOptions o;
  EXPECT_TRUE(HealthMonitor::Validate(o).ok());
  o.down_after = 0;
  Status s = HealthMonitor::Validate(o);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.message().find("--down-after"), std::string::npos);
  o = {};
  o.interval = std::chrono::milliseconds(0);
  EXPECT_NE(HealthMonitor::Validate(o).message().find("--probe-interval-ms"),
            std::string::npos);
  o = {};
  o.up_after = 0;
  EXPECT_EQ(HealthMonitor::Validate(o).code(), EINVAL);
}

}  // namespace
}  // namespace stripefs
