// The stripe client's read deadline: a chunk server that does not answer
// (hung, not dead) must not hold a read; the read is served by
// reconstruction and the stuck call is abandoned. In process: chunk stores
// behind a HangingChunkService (tests/support) that blocks reads until
// released.
#include <gtest/gtest.h>

#include <thread>

#include "backend/chunk/chunk_store.h"
#include "backend/client/stripe_client.h"
#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"
#include "tests/support/hanging_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

using testing::HangingChunkService;
using testing::RandomBytes;

class ReadDeadlineTest : public ::testing::Test {
 protected:
  void Open(std::chrono::milliseconds deadline) {
    testing::InProcessVolumeOptions o;
    o.servers = 6;
    o.client.read_deadline = deadline;
    o.client.map_refresh_interval = std::chrono::milliseconds(0);
    o.wrap_chunks = [this](ChunkService* store) {
      auto w = std::make_unique<HangingChunkService>(store);
      hanging_.push_back(w.get());
      return w;
    };
    auto v = testing::InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
  }
  void TearDown() override {
    for (auto* h : hanging_) h->Release();  // lets abandoned reads finish
    vol_.reset();
  }
  StripeClient& client() { return vol_->volume().client(); }
  // Server holding chunk `index` of stripe 0 of `ino`.
  uint32_t ServerOf(uint64_t ino, int index) {
    auto map = vol_->volume().meta().GetClusterMap();
    auto p = Placement::Create(*map, 6);
    return p->ServersFor(ino, 0)[static_cast<size_t>(index)];
  }

  std::unique_ptr<testing::InProcessVolume> vol_;
  std::vector<HangingChunkService*> hanging_;  // owned by vol_
};

TEST_F(ReadDeadlineTest, HungServerIsReadAroundAndItsCallAbandoned) {
  Open(std::chrono::milliseconds(50));
  auto ino =
      vol_->volume().meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0)->ino;
  const auto data = RandomBytes(client().stripe_size(), 1);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  // The server of data chunk 1 hangs (a stopped process: no error, no
  // answer). Reads that need chunk 1 still complete, byte for byte.
  HangingChunkService* hung = hanging_[ServerOf(ino, 1)];
  hung->Hang();
  for (int round = 0; round < 3; ++round) {
    std::vector<uint8_t> out(data.size());
    auto n = client().Read(ino, 0, out, data.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(out, data) << "round " << round;
    // A read of only the hung chunk's cell.
    std::vector<uint8_t> cell(100);
    n = client().Read(ino, 4096 + 7, cell, data.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_TRUE(std::equal(cell.begin(), cell.end(), data.begin() + 4096 + 7));
  }
  // The hung calls were not waited for: they are still blocked now.
  EXPECT_GE(hung->blocked(), 1);
  auto c = client().counters();
  // The first read waited one deadline and made the server suspect; the
  // next five read around it at once (hedged) while still asking it.
  EXPECT_GE(c.slow_chunk_reads, 1u);
  EXPECT_GE(c.slow_chunk_reads + c.hedged_chunk_reads, 6u);
  EXPECT_GE(c.hedged_chunk_reads, 1u);
  EXPECT_GE(c.abandoned_chunk_reads, 6u);
  EXPECT_GE(c.degraded_reads, 6u);
  EXPECT_EQ(c.chunk_read_errors, 0u) << "slow is not an error";
  hung->Release();
  // Once it answers again, reads are plain again: the first one may still
  // hedge (suspect), and the server's answer clears the suspicion.
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(client().Read(ino, 0, out, data.size()).ok());
  EXPECT_EQ(out, data);
  // Bounded: the released calls finish, then a read is plain.
  bool plain = false;
  for (int i = 0; i < 200 && !plain; ++i) {
    const auto before = client().counters();
    ASSERT_TRUE(client().Read(ino, 0, out, data.size()).ok());
    EXPECT_EQ(out, data);
    const auto after = client().counters();
    plain = after.degraded_reads == before.degraded_reads &&
            after.hedged_chunk_reads == before.hedged_chunk_reads;
    if (!plain) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(plain) << "reads stay degraded after the server answers again";
}

TEST_F(ReadDeadlineTest, ReadModifyWriteReadsAroundAHungServer) {
  Open(std::chrono::milliseconds(50));
  auto ino =
      vol_->volume().meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0)->ino;
  auto data = RandomBytes(client().stripe_size(), 2);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  // A data chunk's server hangs for reads; a partial write needs the old
  // data (RMW or parity delta) and must not wait for it.
  hanging_[ServerOf(ino, 3)]->Hang();
  const auto patch = RandomBytes(300, 3);
  ASSERT_TRUE(client().Write(ino, 3 * 4096 + 10, patch).ok());
  std::copy(patch.begin(), patch.end(), data.begin() + 3 * 4096 + 10);
  hanging_[ServerOf(ino, 3)]->Release();
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(client().Read(ino, 0, out, data.size()).ok());
  EXPECT_EQ(out, data);
}

TEST_F(ReadDeadlineTest, MoreThanMHungServersMeansWaitingForTheSlowCalls) {
  // With 3 of 6 hung (m = 2) no reconstruction is possible: the read waits
  // for the slow calls (it never invents data) and succeeds once they
  // answer.
  Open(std::chrono::milliseconds(20));
  auto ino =
      vol_->volume().meta().MkNode(kRootInode, "f", 0100644, 0, 0, 0)->ino;
  const auto data = RandomBytes(client().stripe_size(), 4);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  for (int i : {0, 4, 5}) hanging_[ServerOf(ino, i)]->Hang();
  std::vector<uint8_t> out(data.size());
  Result<size_t> n = size_t{0};
  std::thread reader([&] { n = client().Read(ino, 0, out, data.size()); });
  // Bounded wait until the reader is stuck on all three hung servers.
  for (int i = 0; i < 6000; ++i) {
    int blocked = 0;
    for (int j : {0, 4, 5}) blocked += hanging_[ServerOf(ino, j)]->blocked();
    if (blocked >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int i : {0, 4, 5}) hanging_[ServerOf(ino, i)]->Release();
  reader.join();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out, data);
}

}  // namespace
}  // namespace stripefs
