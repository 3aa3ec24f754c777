// ClusterVolumeTest: a gtest fixture over a LocalCluster (local_cluster.h)
// and a Volume connected to it, as the cluster tests use them. SetUp of the
// derived test calls StartCluster() and Connect(); TearDown closes the
// volume, takes the cluster down and fails the test if a daemon survived.
// Header-only; link stripefs_client and stripefs_test_cluster.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/client/volume.h"
#include "tests/support/local_cluster.h"

namespace stripefs::testing {

class ClusterVolumeTest : public ::testing::Test {
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

  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<Volume> volume_;
};

}  // namespace stripefs::testing
