#include "backend/client/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace stripefs {
namespace {

ClusterMap MakeMap(int servers, int domains) {
  ClusterMap map;
  map.epoch = 7;
  for (int i = 0; i < servers; ++i) {
    ServerInfo s;
    s.id = static_cast<uint32_t>(100 + i);
    s.address = "127.0.0.1:" + std::to_string(7000 + i);
    s.failure_domain = domains > 0 ? "rack" + std::to_string(i % domains) : "";
    map.servers.push_back(s);
  }
  return map;
}

TEST(PlacementTest, DeterministicAndDistinct) {
  auto a = Placement::Create(MakeMap(12, 0), 6);
  auto b = Placement::Create(MakeMap(12, 0), 6);
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint64_t s = 0; s < 2000; ++s) {
    auto x = a->ServersFor(42, s);
    ASSERT_EQ(x, b->ServersFor(42, s));
    ASSERT_EQ(x.size(), 6u);
    EXPECT_EQ(std::set<uint32_t>(x.begin(), x.end()).size(), 6u);
  }
}

TEST(PlacementTest, BalancedWithinAFewPercent) {
  auto p = Placement::Create(MakeMap(12, 0), 6);
  ASSERT_TRUE(p.ok());
  std::map<uint32_t, int> count;
  const int stripes = 100000;
  for (int s = 0; s < stripes; ++s)
    for (uint32_t id : p->ServersFor(static_cast<uint64_t>(s % 97) + 1,
                                     static_cast<uint64_t>(s)))
      ++count[id];
  const double mean = stripes * 6.0 / 12.0;
  for (auto [id, c] : count) {
    EXPECT_NEAR(c, mean, mean * 0.05) << "server " << id;
  }
  EXPECT_EQ(count.size(), 12u);
}

TEST(PlacementTest, RemovingAServerMovesLittle) {
  ClusterMap map = MakeMap(12, 0);
  auto before = Placement::Create(map, 6);
  map.servers[5].state = ServerState::kOut;
  const uint32_t removed = map.servers[5].id;
  auto after = Placement::Create(map, 6);
  ASSERT_TRUE(before.ok() && after.ok());
  int moved = 0, total = 0, on_removed = 0;
  for (uint64_t s = 0; s < 20000; ++s) {
    auto x = before->ServersFor(9, s), y = after->ServersFor(9, s);
    for (size_t i = 0; i < x.size(); ++i) {
      ++total;
      if (x[i] != y[i]) ++moved;
      if (x[i] == removed) ++on_removed;
      EXPECT_NE(y[i], removed);
    }
  }
  // Exactly the chunks that were on the removed server move (1/12).
  EXPECT_EQ(moved, on_removed);
  EXPECT_NEAR(static_cast<double>(on_removed) / total, 1.0 / 12, 0.01);
}

TEST(PlacementTest, SpreadsOverFailureDomains) {
  auto p = Placement::Create(MakeMap(12, 6), 6);  // 6 racks of 2 servers
  ASSERT_TRUE(p.ok());
  for (uint64_t s = 0; s < 1000; ++s) {
    std::set<uint32_t> racks;
    for (uint32_t id : p->ServersFor(1, s)) racks.insert((id - 100) % 6);
    EXPECT_EQ(racks.size(), 6u) << "stripe " << s;
  }
  auto q = Placement::Create(MakeMap(12, 3), 6);  // 3 racks: two chunks each
  ASSERT_TRUE(q.ok());
  for (uint64_t s = 0; s < 1000; ++s) {
    std::map<uint32_t, int> per_rack;
    for (uint32_t id : q->ServersFor(1, s)) ++per_rack[(id - 100) % 3];
    for (auto [r, c] : per_rack) EXPECT_EQ(c, 2) << "stripe " << s;
  }
}

TEST(PlacementTest, AddingAServerMovesAboutItsShare) {
  ClusterMap map = MakeMap(12, 0);
  auto before = Placement::Create(map, 6);
  ClusterMap bigger = MakeMap(13, 0);
  auto after = Placement::Create(bigger, 6);
  ASSERT_TRUE(before.ok() && after.ok());
  int moved = 0, total = 0;
  for (uint64_t s = 0; s < 20000; ++s) {
    auto x = before->ServersFor(3, s), y = after->ServersFor(3, s);
    for (size_t i = 0; i < x.size(); ++i) {
      ++total;
      moved += x[i] != y[i];
    }
  }
  // The new server's fair share is 1/13 of the chunks; per-index choices
  // cascade a little, so allow up to twice that.
  EXPECT_GT(moved, total / 13 / 2);
  EXPECT_LT(moved, total * 2 / 13) << moved << " of " << total;
}

TEST(PlacementTest, TooFewServersIsAClearError) {
  auto p = Placement::Create(MakeMap(5, 0), 6);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), EINVAL);
  EXPECT_NE(p.status().message().find("needs 6"), std::string::npos);
}

}  // namespace
}  // namespace stripefs
