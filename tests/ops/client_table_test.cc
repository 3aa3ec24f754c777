// ClientTable (metad's list of mounts and repairs): heartbeats register,
// leases expire, a finished client leaves at once, the last finished repair
// is kept, bad kinds are refused. A fake clock, so no test waits.
#include "backend/rpc/client_table.h"

#include <gtest/gtest.h>

namespace stripefs::rpc {
namespace {

using std::chrono::milliseconds;

ClientRecord Record(uint64_t id, const std::string& kind,
                    uint32_t lease_ms = 3000) {
  ClientRecord r;
  r.id = id;
  r.kind = kind;
  r.description = "host pid " + std::to_string(id);
  r.lease_ms = lease_ms;
  return r;
}

size_t Live(const std::vector<ClientRecord>& list, const std::string& kind) {
  size_t n = 0;
  for (const auto& c : list) n += c.kind == kind && !c.finished;
  return n;
}

TEST(ClientTableTest, HeartbeatsRegisterAndLeasesExpire) {
  ClientTable t;
  auto t0 = ClientTable::Clock::now();
  t.SetClockForTest(t0);
  ASSERT_TRUE(t.Heartbeat(Record(1, "mount")).ok());
  ASSERT_TRUE(t.Heartbeat(Record(2, "mount", 10000)).ok());
  ASSERT_TRUE(
      t.Heartbeat(Record(1, "mount")).ok());  // a refresh, not a new one
  EXPECT_EQ(Live(t.List(), "mount"), 2u);
  t.SetClockForTest(t0 + milliseconds(2500));
  ASSERT_TRUE(t.Heartbeat(Record(1, "mount")).ok());
  auto list = t.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].age_ms, 0u);
  EXPECT_EQ(list[1].age_ms, 2500u);
  // Client 2 (lease 10 s) outlives client 1 (3 s) when both go silent.
  t.SetClockForTest(t0 + milliseconds(6000));
  EXPECT_EQ(Live(t.List(), "mount"), 1u);
  t.SetClockForTest(t0 + milliseconds(12000));
  EXPECT_TRUE(t.List().empty());
}

TEST(ClientTableTest, FinishedClientLeavesAndTheLastRepairIsKept) {
  ClientTable t;
  auto t0 = ClientTable::Clock::now();
  t.SetClockForTest(t0);
  ASSERT_TRUE(t.Heartbeat(Record(1, "mount")).ok());
  ClientRecord repair = Record(7, "repair");
  repair.repair.stripes_total = 100;
  repair.repair.stripes_seen = 40;
  ASSERT_TRUE(t.Heartbeat(repair).ok());
  EXPECT_EQ(Live(t.List(), "repair"), 1u);
  ClientRecord done = Record(1, "mount");
  done.finished = true;
  ASSERT_TRUE(t.Heartbeat(done).ok());
  repair.repair.stripes_seen = 100;
  repair.repair.stripes_repaired = 12;
  repair.finished = true;
  ASSERT_TRUE(t.Heartbeat(repair).ok());
  t.SetClockForTest(t0 + milliseconds(3600 * 1000));  // long after any lease
  auto list = t.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].kind, "repair");
  EXPECT_TRUE(list[0].finished);
  EXPECT_EQ(list[0].repair.stripes_repaired, 12u);
  EXPECT_EQ(list[0].age_ms, 3600u * 1000);
}

TEST(ClientTableTest, RefusesUnknownKindsAndBoundsInput) {
  ClientTable t;
  Status s = t.Heartbeat(Record(1, "chunkd"));
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.message().find("mount, repair or scrub"), std::string::npos);
  ClientRecord r = Record(2, "mount", 0);  // lease clamped up
  r.description.assign(10000, 'x');
  ASSERT_TRUE(t.Heartbeat(r).ok());
  auto list = t.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].description.size(), kMaxText);
  EXPECT_EQ(list[0].lease_ms, kMinLeaseMs);
}

}  // namespace
}  // namespace stripefs::rpc
