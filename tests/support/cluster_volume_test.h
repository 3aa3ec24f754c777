// VolumeTest: the checks cluster tests make through a connected Volume
// (volume_, set by the derived fixture): files, reads, bounded polls of the
// cluster map. ClusterVolumeTest: a gtest fixture over a LocalCluster
// (local_cluster.h) and a Volume connected to it. SetUp of the derived test
// calls StartCluster() and Connect(); TearDown closes the volume, takes the
// cluster down and fails the test if a daemon survived. Fixtures that share
// one cluster across a suite derive from VolumeTest alone.
// Header-only; link stripefs_client and stripefs_test_cluster.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/client/placement.h"
#include "backend/client/volume.h"
#include "tests/support/local_cluster.h"

namespace stripefs::testing {

class VolumeTest : public ::testing::Test {
 protected:
  MetaService& meta() { return volume_->meta(); }
  StripeClient& client() { return volume_->client(); }
  // A new empty regular file in the root; its inode (0 after a failure).
  uint64_t NewFile(const std::string& name) {
    auto a = meta().MkNode(kRootInode, name, 0100644, 0, 0, 0);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->ino : 0;
  }
  // The whole file through the stripe client.
  Result<std::vector<uint8_t>> ReadAll(uint64_t ino) {
    auto attr = meta().GetAttr(ino);
    if (!attr.ok()) return attr.status();
    std::vector<uint8_t> out(attr->size);
    auto n = client().Read(ino, 0, out, attr->size);
    if (!n.ok()) return n.status();
    return out;
  }
  // Polls metad's map (bounded: 600 x 100 ms) until server `id` has `state`;
  // returns the epoch of the map that showed it, 0 if it never did.
  uint64_t WaitForState(uint32_t id, ServerState state) {
    for (int i = 0; i < 600; ++i) {
      auto map = meta().GetClusterMap();
      if (map.ok()) {
        for (const auto& s : map->servers)
          if (s.id == id && s.state == state) return map->epoch;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }
  // Polls (bounded) until the stripe client uses a map of at least `epoch`.
  bool WaitForClientEpoch(uint64_t epoch) {
    for (int i = 0; i < 600 && client().map_epoch() < epoch; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return client().map_epoch() >= epoch;
  }
  // Number of stripes among the first `stripes` of `ino` with a data chunk
  // on server `id`.
  int StripesWithDataOn(uint64_t ino, int stripes, uint32_t id) {
    const Geometry g = volume_->geometry();
    auto map = meta().GetClusterMap();
    auto p = Placement::Create(*map, g.k + g.m);
    int n = 0;
    for (int s = 0; s < stripes; ++s) {
      auto servers = p->ServersFor(ino, static_cast<uint64_t>(s));
      for (uint32_t i = 0; i < g.k; ++i)
        if (servers[i] == id) {
          ++n;
          break;
        }
    }
    return n;
  }

  std::unique_ptr<Volume> volume_;
};

class ClusterVolumeTest : public VolumeTest {
 protected:
  void StartCluster(const LocalClusterOptions& o) {
    auto c = LocalCluster::Start(o);
    if (c.status().code() == EOPNOTSUPP)
      GTEST_SKIP() << "local cluster: " << c.status().message();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = std::move(c).value();
  }
  // (Re)connects the volume to the cluster's metad.
  void Connect(const StripeClientOptions& o = {},
               const MetaHoldOptions* hold = nullptr) {
    if (!cluster_) return;  // StartCluster skipped the test
    volume_.reset();
    auto v = Volume::ConnectCluster(cluster_->meta_address(),
                                    cluster_->key_file(), o, hold);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    volume_ = std::move(v).value();
  }
  void TearDown() override {
    volume_.reset();
    if (cluster_) {
      Status st = cluster_->Down();
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    cluster_.reset();
  }

  // `cluster kill` / `cluster start` of "metad" or a chunkd id.
  void Signal(const std::string& server, int sig) {
    Status st = cluster_->Signal(server, sig);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void Signal(int chunkd, int sig) { Signal(std::to_string(chunkd), sig); }
  void Kill(const std::string& server) { Signal(server, SIGKILL); }
  void Kill(int chunkd) { Signal(chunkd, SIGKILL); }
  void Start(const std::string& server) {
    Status st = cluster_->StartServer(server);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void Start(int chunkd) { Start(std::to_string(chunkd)); }

  std::unique_ptr<LocalCluster> cluster_;
};

}  // namespace stripefs::testing
