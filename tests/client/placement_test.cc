#include "backend/client/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "backend/client/balanced_table.h"
#include "backend/meta/meta_schema.h"
#include "common/coding.h"

namespace stripefs {
namespace {

constexpr uint32_t kTestGroups = 4096;  // kBalanced maps of these tests

ClusterMap MakeMap(int servers, int domains,
                   PlacementScheme scheme = PlacementScheme::kLegacy) {
  ClusterMap map;
  map.epoch = 7;
  map.placement = scheme;
  map.placement_groups = scheme == PlacementScheme::kBalanced ? kTestGroups : 0;
  for (int i = 0; i < servers; ++i) {
    ServerInfo s;
    s.id = static_cast<uint32_t>(100 + i);
    s.address = "127.0.0.1:" + std::to_string(7000 + i);
    s.failure_domain = domains > 0 ? "rack" + std::to_string(i % domains) : "";
    map.servers.push_back(s);
  }
  return map;
}

// Chunks per server id over `stripes` stripes of 64-stripe files.
std::map<uint32_t, int> Counts(const Placement& p, int stripes) {
  std::map<uint32_t, int> count;
  for (int s = 0; s < stripes; ++s)
    for (uint32_t id : p.ServersFor(2 + static_cast<uint64_t>(s / 64),
                                    static_cast<uint64_t>(s % 64)))
      ++count[id];
  return count;
}

// Entries (group, index) whose server differs between two tables; `from`
// counts those that were on server `id` before.
struct Moves {
  int moved = 0, total = 0, from = 0;
};
Moves Compare(const Placement& a, const Placement& b, uint32_t id) {
  Moves m;
  for (uint32_t g = 0; g < a.group_count(); ++g) {
    auto x = a.Row(g), y = b.Row(g);
    for (size_t i = 0; i < x.size(); ++i) {
      ++m.total;
      m.moved += x[i] != y[i];
      m.from += x[i] == id && x[i] != y[i];
    }
  }
  return m;
}

class PlacementTest : public ::testing::TestWithParam<PlacementScheme> {
 protected:
  ClusterMap Map(int servers, int domains) {
    return MakeMap(servers, domains, GetParam());
  }
};

TEST_P(PlacementTest, DeterministicAndDistinct) {
  auto a = Placement::Create(Map(12, 0), 6);
  auto b = Placement::Create(Map(12, 0), 6);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->scheme(), GetParam());
  for (uint64_t s = 0; s < 2000; ++s) {
    auto x = a->ServersFor(42, s);
    ASSERT_EQ(x, b->ServersFor(42, s));
    ASSERT_EQ(x.size(), 6u);
    EXPECT_EQ(std::set<uint32_t>(x.begin(), x.end()).size(), 6u);
  }
}

TEST_P(PlacementTest, BalancedWithinAFewPercent) {
  auto p = Placement::Create(Map(12, 0), 6);
  ASSERT_TRUE(p.ok());
  const int stripes = 100000;
  auto count = Counts(*p, stripes);
  const double mean = stripes * 6.0 / 12.0;
  for (auto [id, c] : count) {
    EXPECT_NEAR(c, mean, mean * 0.05) << "server " << id;
  }
  EXPECT_EQ(count.size(), 12u);
}

// Marking a server out moves exactly the chunks that were on it; a down
// server moves nothing.
TEST_P(PlacementTest, OutMovesOnlyItsChunksDownMovesNone) {
  ClusterMap map = Map(12, 0);
  auto before = Placement::Create(map, 6);
  map.servers[5].state = ServerState::kDown;
  auto down = Placement::Create(map, 6);
  map.servers[5].state = ServerState::kOut;
  auto after = Placement::Create(map, 6);
  ASSERT_TRUE(before.ok() && down.ok() && after.ok());
  const uint32_t removed = map.servers[5].id;
  EXPECT_EQ(Compare(*before, *down, removed).moved, 0);
  const Moves m = Compare(*before, *after, removed);
  EXPECT_EQ(m.moved, m.from);
  EXPECT_NEAR(static_cast<double>(m.from) / m.total, 1.0 / 12, 0.01);
  for (uint32_t g = 0; g < after->group_count(); ++g)
    for (uint32_t id : after->Row(g)) ASSERT_NE(id, removed);
  // A second server out: its own chunks move, and besides them at most the
  // first one's re-placed chunk in rows that held both (the two re-placed
  // entries must differ).
  const uint32_t second = map.servers[9].id;
  map.servers[9].state = ServerState::kOut;
  auto two = Placement::Create(map, 6);
  ASSERT_TRUE(two.ok());
  const Moves m2 = Compare(*after, *two, second);
  int rows_with_both = 0;
  for (uint32_t g = 0; g < before->group_count(); ++g) {
    auto row = before->Row(g);
    rows_with_both += std::count(row.begin(), row.end(), removed) &&
                      std::count(row.begin(), row.end(), second);
  }
  EXPECT_GT(m2.from, 0);
  EXPECT_LE(m2.moved - m2.from, rows_with_both);
}

TEST_P(PlacementTest, SpreadsOverFailureDomains) {
  auto p = Placement::Create(Map(12, 6), 6);  // 6 racks of 2 servers
  ASSERT_TRUE(p.ok());
  for (uint64_t s = 0; s < 1000; ++s) {
    std::set<uint32_t> racks;
    for (uint32_t id : p->ServersFor(1, s)) racks.insert((id - 100) % 6);
    EXPECT_EQ(racks.size(), 6u) << "stripe " << s;
  }
  auto q = Placement::Create(Map(12, 3), 6);  // 3 racks: two chunks each
  ASSERT_TRUE(q.ok());
  for (uint64_t s = 0; s < 1000; ++s) {
    std::map<uint32_t, int> per_rack;
    for (uint32_t id : q->ServersFor(1, s)) ++per_rack[(id - 100) % 3];
    for (auto [r, c] : per_rack) EXPECT_EQ(c, 2) << "stripe " << s;
  }
}

TEST_P(PlacementTest, TooFewServersIsAClearError) {
  auto p = Placement::Create(Map(5, 0), 6);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EINVAL);
  EXPECT_NE(p.status().message().find("needs 6"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Schemes, PlacementTest,
                         ::testing::Values(PlacementScheme::kLegacy,
                                           PlacementScheme::kBalanced),
                         [](const auto& info) {
                           return info.param == PlacementScheme::kLegacy
                                      ? std::string("Legacy")
                                      : std::string("Balanced");
                         });

TEST(LegacyPlacementTest, AddingAServerMovesAboutItsShare) {
  auto before = Placement::Create(MakeMap(12, 0), 6);
  auto after = Placement::Create(MakeMap(13, 0), 6);
  ASSERT_TRUE(before.ok() && after.ok());
  const Moves m = Compare(*before, *after, 0);
  // The new server's fair share is 1/13 of the chunks; per-index choices
  // cascade a little, so allow up to twice that.
  EXPECT_GT(m.moved, m.total / 13 / 2);
  EXPECT_LT(m.moved, m.total * 2 / 13) << m.moved << " of " << m.total;
}

// The table a legacy Placement keeps equals the scan it replaced, row by
// row, with servers down and out.
TEST(LegacyPlacementTest, TableEqualsTheScan) {
  ClusterMap map = MakeMap(20, 5);
  map.servers[3].state = ServerState::kOut;
  map.servers[7].state = ServerState::kDown;
  auto p = Placement::Create(map, 6);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->group_count(), Placement::kLegacyPgCount);
  for (uint32_t g = 0; g < p->group_count(); ++g) {
    ASSERT_EQ(p->ServersForGroup(g), p->LegacyScan(g)) << "group " << g;
  }
}

// A cluster map stored in the format before placement schemes (no trailer)
// decodes as kLegacy and places every stripe exactly where the code before
// the balanced scheme put it (checksums taken from that code).
TEST(LegacyPlacementTest, OldFormatMapPlacesAsBefore) {
  const uint64_t want[2] = {0x9d1f8dd5e46d49ddull, 0xa52752c3230d4e96ull};
  const std::vector<uint32_t> first[2] = {{110, 107, 104, 102, 109, 111},
                                          {110, 107, 109, 108, 100, 105}};
  for (int variant = 0; variant < 2; ++variant) {
    std::string old;  // epoch, count, then id/address/domain/state each
    coding::PutLe<uint64_t>(&old, 7);
    coding::PutLe<uint32_t>(&old, 12);
    for (uint32_t i = 0; i < 12; ++i) {
      const std::string addr = "127.0.0.1:" + std::to_string(7000 + i);
      const std::string dom = variant ? "rack" + std::to_string(i % 4) : "";
      coding::PutLe<uint32_t>(&old, 100 + i);
      coding::PutLe<uint32_t>(&old, static_cast<uint32_t>(addr.size()));
      old += addr;
      coding::PutLe<uint32_t>(&old, static_cast<uint32_t>(dom.size()));
      old += dom;
      old += static_cast<char>(i == 3   ? ServerState::kOut
                               : i == 5 ? ServerState::kDown
                                        : ServerState::kUp);
    }
    auto map = meta_schema::DecodeClusterMap(old);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    EXPECT_EQ(map->placement, PlacementScheme::kLegacy);
    EXPECT_EQ(meta_schema::EncodeClusterMap(*map), old);  // unchanged bytes
    auto p = Placement::Create(*map, 6);
    ASSERT_TRUE(p.ok());
    uint64_t h = 0;
    for (uint64_t ino = 2; ino < 40; ++ino)
      for (uint64_t s = 0; s < 50; ++s)
        for (uint32_t id : p->ServersFor(ino, s)) h = PlacementHash(h, id);
    EXPECT_EQ(h, want[variant]) << "variant " << variant;
    EXPECT_EQ(p->ServersFor(42, 0), first[variant]);
  }
}

// Group-chunks per server stay within the cap: (1 + 1/kSlackDen) x the
// mean, rounded up; plain hashing of 4096 x 6 entries onto 60 servers
// (~410 each) would spread them +-15 %.
TEST(BalancedPlacementTest, GroupChunksPerServerWithinTheCap) {
  auto p = Placement::Create(MakeMap(60, 10, PlacementScheme::kBalanced), 6);
  ASSERT_TRUE(p.ok());
  std::map<uint32_t, int> per_server;
  for (uint32_t g = 0; g < p->group_count(); ++g)
    for (uint32_t id : p->Row(g)) ++per_server[id];
  const double mean = kTestGroups * 6.0 / 60;
  ASSERT_EQ(per_server.size(), 60u);
  for (auto [id, c] : per_server) {
    EXPECT_LE(c, std::ceil(mean * (kSlackDen + 1) / kSlackDen)) << id;
    EXPECT_GE(c, mean * 0.9) << id;
  }
}

// Adding a server moves its share (1/N of the entries, all onto it) and
// nothing else.
TEST(BalancedPlacementTest, AddingAServerMovesAboutItsShare) {
  ClusterMap map = MakeMap(60, 10, PlacementScheme::kBalanced);
  auto before = Placement::Create(map, 6);
  ServerInfo s;
  s.id = 1000;
  s.failure_domain = "rack3";
  map.servers.push_back(s);
  auto after = Placement::Create(map, 6);
  ASSERT_TRUE(before.ok() && after.ok());
  const Moves m = Compare(*before, *after, 0);
  const double share = static_cast<double>(m.moved) / m.total;
  EXPECT_GT(share, 0.9 / 61);
  EXPECT_LT(share, 1.1 / 61) << m.moved << " of " << m.total;
  for (uint32_t g = 0; g < before->group_count(); ++g) {
    auto x = before->Row(g), y = after->Row(g);
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] == y[i]) continue;
      ASSERT_EQ(y[i], 1000u) << "group " << g;
    }
  }
}

// A Create that reuses the previous epoch's base (only states changed)
// builds the same table as one from scratch.
TEST(BalancedPlacementTest, ReusedBaseGivesTheSameTable) {
  ClusterMap map = MakeMap(40, 8, PlacementScheme::kBalanced);
  auto first = Placement::Create(map, 6);
  map.servers[4].state = ServerState::kOut;
  map.servers[9].state = ServerState::kDown;
  map.epoch++;
  auto reused = Placement::Create(map, 6, &*first);
  auto fresh = Placement::Create(map, 6);
  ASSERT_TRUE(first.ok() && reused.ok() && fresh.ok());
  for (uint32_t g = 0; g < fresh->group_count(); ++g)
    ASSERT_EQ(reused->ServersForGroup(g), fresh->ServersForGroup(g)) << g;
  map.servers[2].weight = 50;  // not only states: the base is rebuilt
  auto reweighted = Placement::Create(map, 6, &*reused);
  auto reweighted_fresh = Placement::Create(map, 6);
  ASSERT_TRUE(reweighted.ok() && reweighted_fresh.ok());
  for (uint32_t g = 0; g < fresh->group_count(); ++g)
    ASSERT_EQ(reweighted->ServersForGroup(g),
              reweighted_fresh->ServersForGroup(g))
        << g;
}

// A server of twice the default weight holds about twice the entries; one
// of weight 0 holds none.
TEST(BalancedPlacementTest, WeightsScaleTheShare) {
  ClusterMap map = MakeMap(30, 0, PlacementScheme::kBalanced);
  // The heavy server last in id order: it takes its share when it joins.
  map.servers[29].weight = 2 * kDefaultServerWeight;
  map.servers[1].weight = 0;
  auto p = Placement::Create(map, 6);
  ASSERT_TRUE(p.ok());
  std::map<uint32_t, int> per_server;
  for (uint32_t g = 0; g < p->group_count(); ++g)
    for (uint32_t id : p->Row(g)) ++per_server[id];
  const double unit = kTestGroups * 6.0 / 30;  // 30 weight units
  EXPECT_NEAR(per_server[129], 2 * unit, 2 * unit * 0.05);
  EXPECT_EQ(per_server.count(101), 0u);
  EXPECT_NEAR(per_server[102], unit, unit * 0.05);
}

// A file's consecutive stripes land on consecutive groups; consecutive
// inodes start far apart.
TEST(BalancedPlacementTest, FileStripesOnConsecutiveGroups) {
  auto p = Placement::Create(MakeMap(12, 0, PlacementScheme::kBalanced), 6);
  ASSERT_TRUE(p.ok());
  const uint32_t g0 = p->PlacementGroup(5, 0);
  for (uint64_t s = 0; s < 10000; ++s) {
    ASSERT_EQ(p->PlacementGroup(5, s), (g0 + s) % kTestGroups);
  }
  EXPECT_EQ(BalancedGroup(5, kTestGroups, kTestGroups), g0);
  const uint32_t g1 = p->PlacementGroup(6, 0);
  const uint32_t gap =
      std::min((g1 - g0) % kTestGroups, (g0 - g1) % kTestGroups);
  EXPECT_GT(gap, kTestGroups / 4);
}

TEST(BalancedPlacementTest, GroupCountOutOfRangeIsAnError) {
  ClusterMap map = MakeMap(12, 0, PlacementScheme::kBalanced);
  map.placement_groups = 0;
  EXPECT_EQ(Placement::Create(map, 6).status().code(), EINVAL);
  map.placement_groups = kMaxPlacementGroups + 1;
  EXPECT_EQ(Placement::Create(map, 6).status().code(), EINVAL);
}

}  // namespace
}  // namespace stripefs
