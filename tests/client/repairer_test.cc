// Repairer::Run over an in-process volume whose servers can be "down"
// (FaultInjectingChunkService): a stripe repair cannot bring back to full
// redundancy is counted (stripes_failed, stripes_unreachable) with the
// chunks and servers named, never reported as done; once the servers are
// back the same run repairs it and reports nothing failed.
#include "backend/client/repairer.h"

#include <gtest/gtest.h>

#include <set>

#include "backend/client/placement.h"
#include "tests/support/fault_injecting_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

using testing::FaultInjectingChunkService;
using testing::RandomBytes;

constexpr int kServers = 8;
constexpr uint64_t kStripes = 12;

class RepairerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::InProcessVolumeOptions o;
    o.servers = kServers;
    o.geometry = Geometry{4, 2, 4096};
    auto v = testing::InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    auto a = meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ino_ = a->ino;
  }

  MetaService& meta() { return vol_->volume().meta(); }
  StripeClient& client() { return vol_->volume().client(); }
  FaultInjectingChunkService& fault(uint32_t id) {
    return *vol_->service<FaultInjectingChunkService>(id);
  }
  void Write(uint32_t seed) {
    data_ = RandomBytes(kStripes * client().stripe_size(), seed);
    ASSERT_TRUE(client().Write(ino_, 0, data_).ok());
  }
  // Stripes of the file that have a chunk on server `id`.
  std::set<uint64_t> StripesOn(uint32_t id) {
    auto map = meta().GetClusterMap();
    EXPECT_TRUE(map.ok());
    auto p = Placement::Create(*map, 6);
    EXPECT_TRUE(p.ok());
    std::set<uint64_t> out;
    for (uint64_t s = 0; s < kStripes; ++s)
      for (uint32_t sid : p->ServersFor(ino_, s))
        if (sid == id) out.insert(s);
    return out;
  }
  // Stripes whose missing mask is not 0.
  uint64_t MarkedMissing() {
    auto all = meta().ListStripes(0, 0, 1000);
    EXPECT_TRUE(all.ok());
    uint64_t n = 0;
    for (const auto& ref : *all) n += ref.sv.missing_mask != 0;
    return n;
  }
  RepairProgress Repair(bool scrub = false) {
    RepairOptions o;
    o.scrub = scrub;
    Repairer repairer(&vol_->volume());
    auto r = repairer.Run(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RepairProgress{};
  }
  void ExpectReadable() {
    std::vector<uint8_t> got(data_.size());
    auto n = client().Read(ino_, 0, got, data_.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(got, data_);
  }

  std::unique_ptr<testing::InProcessVolume> vol_;
  uint64_t ino_ = 0;
  std::vector<uint8_t> data_;
};

// Metad marked a server down (it does not answer): its stripes were written
// healthy (missing mask 0) but are degraded now. Repair counts them as
// failed and says why, without marking the intact chunks missing; after
// the server is back, nothing is left failed.
TEST_F(RepairerTest, StripesOnAServerMarkedDownAreCountedAsFailed) {
  Write(1);
  const uint32_t victim = 3;
  const std::set<uint64_t> on_victim = StripesOn(victim);
  ASSERT_FALSE(on_victim.empty());
  fault(victim).down = true;
  ASSERT_TRUE(meta().SetServerState(victim, ServerState::kDown).ok());
  ASSERT_TRUE(client().RefreshClusterMap().ok());

  RepairProgress p = Repair();
  EXPECT_EQ(p.stripes_total, on_victim.size());
  EXPECT_EQ(p.stripes_seen, on_victim.size());
  EXPECT_EQ(p.stripes_failed, on_victim.size());
  EXPECT_EQ(p.stripes_unreachable, on_victim.size());
  EXPECT_EQ(p.stripes_repaired, 0u);
  EXPECT_EQ(p.chunks_rebuilt, 0u);
  EXPECT_NE(p.first_error.find("still degraded"), std::string::npos)
      << p.first_error;
  EXPECT_NE(p.first_error.find("(server " + std::to_string(victim) + ")"),
            std::string::npos)
      << p.first_error;
  EXPECT_EQ(MarkedMissing(), 0u) << "intact chunks on a down server were "
                                    "marked missing";
  ExpectReadable();

  // Back up: its chunks were never lost, so there is nothing to rebuild and
  // nothing failed.
  fault(victim).down = false;
  ASSERT_TRUE(meta().SetServerState(victim, ServerState::kUp).ok());
  ASSERT_TRUE(client().RefreshClusterMap().ok());
  p = Repair();
  EXPECT_EQ(p.stripes_failed, 0u) << p.first_error;
  EXPECT_EQ(p.stripes_unreachable, 0u);
}

// A server stops answering while metad still thinks it up: writes commit
// degraded (missing mask set). Repair cannot reach the server, so every
// such stripe stays degraded and is counted, its mask kept; once the server
// answers again the next run rebuilds them all and reports 0 failed.
TEST_F(RepairerTest,
       StripesWrittenWhileAServerIsUnreachableStayFailedUntilBack) {
  const uint32_t victim = 5;
  fault(victim).down = true;  // the map still says up
  Write(2);
  const uint64_t degraded = MarkedMissing();
  ASSERT_EQ(degraded, StripesOn(victim).size());
  ASSERT_GT(degraded, 0u);

  RepairProgress p = Repair();
  EXPECT_EQ(p.stripes_seen, degraded);
  EXPECT_EQ(p.stripes_failed, degraded) << p.first_error;
  EXPECT_EQ(p.stripes_unreachable, degraded);
  EXPECT_EQ(p.stripes_repaired, 0u);
  EXPECT_NE(p.first_error.find("(server " + std::to_string(victim) + ")"),
            std::string::npos)
      << p.first_error;
  EXPECT_EQ(MarkedMissing(), degraded) << "a mask was cleared while degraded";
  ExpectReadable();

  fault(victim).down = false;
  p = Repair();
  EXPECT_EQ(p.stripes_failed, 0u) << p.first_error;
  EXPECT_EQ(p.stripes_unreachable, 0u);
  EXPECT_EQ(p.stripes_repaired, degraded);
  EXPECT_EQ(p.chunks_rebuilt, degraded);
  EXPECT_EQ(MarkedMissing(), 0u);
}

// More than m servers of a stripe unreachable: scrub cannot read k chunks,
// so the stripe fails with the count of readable chunks (and is not among
// the "only servers down" ones, since it cannot even be reconstructed).
TEST_F(RepairerTest, ScrubCountsStripesWithFewerThanKReachableChunks) {
  Write(3);
  auto map = meta().GetClusterMap();
  ASSERT_TRUE(map.ok());
  auto placement = Placement::Create(*map, 6);
  ASSERT_TRUE(placement.ok());
  const std::vector<uint32_t> servers = placement->ServersFor(ino_, 0);
  for (int i = 0; i < 3; ++i)
    fault(servers[static_cast<size_t>(i)]).down = true;
  uint64_t unreadable = 0;  // stripes with 3 chunks on the three
  for (uint64_t s = 0; s < kStripes; ++s) {
    int gone = 0;
    for (uint32_t id : placement->ServersFor(ino_, s))
      gone += fault(id).down ? 1 : 0;
    unreadable += gone > 2;
  }
  ASSERT_GE(unreadable, 1u);

  RepairProgress p = Repair(/*scrub=*/true);
  EXPECT_EQ(p.stripes_seen, kStripes);
  // 6 of 8 servers per stripe: every stripe has a chunk on one of the 3.
  EXPECT_EQ(p.stripes_failed, kStripes) << p.first_error;
  EXPECT_EQ(p.stripes_failed - p.stripes_unreachable, unreadable);
  for (int i = 0; i < 3; ++i)
    fault(servers[static_cast<size_t>(i)]).down = false;
  p = Repair(/*scrub=*/true);
  EXPECT_EQ(p.stripes_failed, 0u) << p.first_error;
}

}  // namespace
}  // namespace stripefs
