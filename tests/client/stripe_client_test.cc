#include "backend/client/stripe_client.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "backend/chunk/chunk_store.h"
#include "backend/client/orphan_purger.h"
#include "backend/client/repairer.h"
#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"
#include "ec/codec.h"
#include "tests/client/counting_meta_service.h"
#include "tests/support/fault_injecting_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

namespace fs = std::filesystem;
using testing::CountingMetaService;
using testing::FaultInjectingChunkService;

using testing::RandomBytes;

// A volume of `servers` in-process chunk stores (each behind a fault
// injector) and a MetaStore behind a call counter (tests/support).
class StripeClientTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(8, Geometry{4, 2, 4096}); }

  void Open(int servers, Geometry g, const StripeClientOptions& client = {}) {
    faults_.clear();
    vol_.reset();
    testing::InProcessVolumeOptions o;
    o.servers = servers;
    o.geometry = g;
    o.client = client;
    o.wrap_meta = [this](std::unique_ptr<MetaService> inner) {
      auto counting = std::make_unique<CountingMetaService>(std::move(inner));
      counting_ = counting.get();
      return counting;
    };
    auto v = testing::InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    for (size_t i = 0; i < vol_->servers(); ++i)
      faults_.push_back(vol_->service<FaultInjectingChunkService>(i));
  }

  MetaService& meta() { return vol_->volume().meta(); }
  StripeClient& client() { return vol_->volume().client(); }
  uint64_t S() { return client().stripe_size(); }
  // A side client's options that cache degraded stripes only.
  StripeClientOptions DegradedCacheOnly() {
    StripeClientOptions o;
    o.read_ahead_stripes = 0;
    o.read_cache_bytes = 64 * S();
    return o;
  }

  uint64_t NewFile(const std::string& name) {
    auto a = meta().MkNode(kRootInode, name, 0100644, 0, 0, 0);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->ino : 0;
  }
  uint64_t Size(uint64_t ino) { return meta().GetAttr(ino)->size; }
  // Runs an OrphanPurger over `inos` to the end: every one is purged, with
  // no error.
  void PurgeAll(const std::vector<uint64_t>& inos) {
    std::atomic<uint64_t> purged{0}, errors{0};
    {
      OrphanPurger purger({&meta(), &client(), &purged, &errors});
      for (uint64_t ino : inos) purger.Enqueue(ino);
      purger.Drain();
    }
    EXPECT_EQ(purged.load(), inos.size());
    EXPECT_EQ(errors.load(), 0u);
  }
  // Orphans for the purger: `n` files prefix0, prefix1, ... in the root,
  // every `written_every`-th one (from the first) holding a stripe and a
  // bit, the rest empty, all unlinked. Their inodes go to `inos`.
  void MakeOrphans(const std::string& prefix, int n, int written_every,
                   std::vector<uint64_t>* inos) {
    for (int i = 0; i < n; ++i) {
      const std::string name = prefix + std::to_string(i);
      uint64_t ino = NewFile(name);
      if (i % written_every == 0) {
        ASSERT_TRUE(
            client()
                .Write(ino, 0, RandomBytes(S() + 100, static_cast<uint32_t>(i)))
                .ok());
      }
      ASSERT_TRUE(meta().Unlink(kRootInode, name).ok());
      inos->push_back(ino);
    }
  }
  int ChunkWrites() {
    int n = 0;
    for (auto* f : faults_) n += f->writes;
    return n;
  }
  uint64_t StoredChunks() { return vol_->StoredChunks(); }
  // Writes `ranges` of `buf` into stripe 0 of `ino`, which must become one
  // parity-delta version with one commit; *bytes_read: what it read.
  void WriteOneDelta(uint64_t ino, const std::vector<uint8_t>& buf,
                     const std::vector<StripeRange>& ranges,
                     uint64_t* bytes_read) {
    const int commits = counting_->commit_calls;
    const auto before = client().counters();
    ASSERT_TRUE(client().WriteStripe(ino, 0, buf, ranges, S()).ok());
    const auto after = client().counters();
    EXPECT_EQ(counting_->commit_calls - commits, 1);
    EXPECT_EQ(after.parity_delta_updates - before.parity_delta_updates, 1u);
    EXPECT_EQ(after.rmw_stripes - before.rmw_stripes, 0u);
    *bytes_read = after.rmw_bytes_read - before.rmw_bytes_read;
  }
  // Stripe 0 of `ino` has parity consistent with its data: a verifying
  // repair finds nothing to rewrite.
  void ExpectParityConsistent(uint64_t ino) {
    auto sv = meta().GetStripes(ino, 0, 1);
    ASSERT_TRUE(sv.ok()) << sv.status().ToString();
    ASSERT_FALSE(sv->empty()) << "no committed stripe 0";
    auto fixed = RepairStripe(client(), ino, sv->front(), /*verify=*/true);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    EXPECT_EQ(*fixed, 0u) << "chunks rewritten by a verifying repair";
  }
  std::vector<uint8_t> ReadAll(uint64_t ino, Status* st = nullptr) {
    uint64_t size = Size(ino);
    std::vector<uint8_t> out(size);
    auto n = client().Read(ino, 0, out, size);
    if (st) *st = n.status();
    if (!n.ok()) {
      if (!st) ADD_FAILURE() << n.status().ToString();
      return {};
    }
    EXPECT_EQ(*n, size);
    return out;
  }
  // Server ids holding the chunks of stripe `s` of `ino`.
  std::vector<uint32_t> ServersOf(uint64_t ino, uint64_t s) {
    auto map = meta().GetClusterMap();
    auto p = Placement::Create(*map, 6);
    return p->ServersFor(ino, s);
  }
  void SetDown(uint32_t id, bool down) {
    faults_[id]->down = down;
    ASSERT_TRUE(
        meta()
            .SetServerState(id, down ? ServerState::kDown : ServerState::kUp)
            .ok());
    ASSERT_TRUE(client().RefreshClusterMap().ok());
  }

  std::unique_ptr<testing::InProcessVolume> vol_;
  std::vector<FaultInjectingChunkService*> faults_;  // owned by vol_
  CountingMetaService* counting_ = nullptr;          // owned by vol_
};

TEST_F(StripeClientTest, RandomWritesReadBackByteForByte) {
  const uint64_t ino = NewFile("f");
  std::vector<uint8_t> model;
  std::mt19937 rng(1234);
  for (int i = 0; i < 60; ++i) {
    uint64_t off = rng() % (5 * S());
    size_t len = 1 + rng() % (2 * S());
    auto data = RandomBytes(len, static_cast<uint32_t>(i));
    ASSERT_TRUE(client().Write(ino, off, data).ok()) << "op " << i;
    if (model.size() < off + len) model.resize(off + len, 0);
    std::copy(data.begin(), data.end(), model.begin() + static_cast<long>(off));
    ASSERT_EQ(Size(ino), model.size());
  }
  EXPECT_EQ(ReadAll(ino), model);
  // Reads at arbitrary offsets and lengths, including past EOF.
  for (int i = 0; i < 100; ++i) {
    uint64_t off = rng() % (model.size() + 100);
    std::vector<uint8_t> buf(1 + rng() % (3 * S()));
    auto n = client().Read(ino, off, buf, model.size());
    ASSERT_TRUE(n.ok());
    size_t expect = off >= model.size()
                        ? 0
                        : std::min<size_t>(buf.size(), model.size() - off);
    ASSERT_EQ(*n, expect);
    ASSERT_TRUE(std::equal(buf.begin(), buf.begin() + static_cast<long>(expect),
                           model.begin() + static_cast<long>(off)));
  }
  auto c = client().counters();
  EXPECT_GT(c.rmw_stripes + c.parity_delta_updates, 0u);
}

TEST_F(StripeClientTest, FullStripeWritesNeedNoReads) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(4 * S(), 5);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  auto c = client().counters();
  EXPECT_EQ(c.full_stripe_writes, 4u);
  EXPECT_EQ(c.rmw_stripes, 0u);
  EXPECT_EQ(c.rmw_bytes_read, 0u);
  // Overwrite with full stripes again: still no reads, old versions GC'd.
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  EXPECT_EQ(client().counters().rmw_bytes_read, 0u);
  EXPECT_EQ(ReadAll(ino), data);
  client().DrainGarbage();  // old versions are collected in the background
  EXPECT_EQ(StoredChunks(), 4u * 6u);  // exactly one version per stripe remains
}

// A full stripe is encoded in place (data chunks sent from the request,
// parity from pooled buffers): every stored chunk must equal what the old
// copy-into-zeroed-cells encode made, also when the pooled parity buffers
// were used before (stale bytes) and when the stripe starts mid-request.
TEST_F(StripeClientTest, InPlaceFullStripeEncodeEqualsCopiedEncode) {
  const uint64_t ino = NewFile("f");
  const uint32_t k = 4, m = 2, c = 4096;
  auto codec = ec::Codec::Create(k, m);
  ASSERT_TRUE(codec.ok());
  // Stripes 0..2 from one request at an offset inside a bigger buffer, then
  // stripe 1 again (the pool's buffers hold the earlier parity by then),
  // then a partial write (RMW or delta) to stripe 2 between them.
  auto data = RandomBytes(3 * S() + 100, 7);
  ASSERT_TRUE(
      client().Write(ino, 0, std::span<const uint8_t>(data).subspan(100)).ok());
  std::vector<uint8_t> model(data.begin() + 100, data.end());
  auto again = RandomBytes(S(), 8);
  ASSERT_TRUE(client().Write(ino, S(), again).ok());
  std::copy(again.begin(), again.end(), model.begin() + S());
  auto patch = RandomBytes(5000, 9);
  ASSERT_TRUE(client().Write(ino, 2 * S() + 3000, patch).ok());
  std::copy(patch.begin(), patch.end(), model.begin() + 2 * S() + 3000);
  EXPECT_EQ(client().counters().full_stripe_writes, 4u);
  auto stripes = meta().GetStripes(ino, 0, 3);
  ASSERT_TRUE(stripes.ok());
  ASSERT_EQ(stripes->size(), 3u);
  for (const StripeVersion& sv : *stripes) {
    // Reference: the old way, data copied into zeroed cells.
    std::vector<std::vector<uint8_t>> cells(k + m, std::vector<uint8_t>(c, 0));
    for (uint32_t i = 0; i < k; ++i)
      std::memcpy(cells[i].data(), model.data() + sv.stripe * S() + i * c, c);
    std::vector<const uint8_t*> d;
    std::vector<uint8_t*> p;
    for (uint32_t i = 0; i < k; ++i) d.push_back(cells[i].data());
    for (uint32_t q = 0; q < m; ++q) p.push_back(cells[k + q].data());
    ASSERT_TRUE((*codec)->Encode(d, p, c).ok());
    ASSERT_EQ(sv.chunk_len, c);
    const auto servers = ServersOf(ino, sv.stripe);
    for (uint32_t i = 0; i < k + m; ++i) {
      auto got =
          faults_[servers[i]]->ReadChunk({ino, sv.stripe, i}, sv.version, 0, c);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, cells[i]) << "stripe " << sv.stripe << " chunk " << i;
    }
  }
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, ParityDeltaMatchesReadModifyWrite) {
  // 8+2 with small cells so a one-cell write qualifies for parity delta.
  Open(12, Geometry{8, 2, 4096});
  const uint64_t a = NewFile("a");
  auto base = RandomBytes(S(), 1);
  auto patch = RandomBytes(1000, 2);
  ASSERT_TRUE(client().Write(a, 0, base).ok());
  ASSERT_TRUE(client().Write(a, 4096 * 3 + 100, patch).ok());
  EXPECT_EQ(client().counters().parity_delta_updates, 1u);
  std::copy(patch.begin(), patch.end(), base.begin() + 4096 * 3 + 100);
  EXPECT_EQ(ReadAll(a), base);
  // Parity is consistent: a verifying repair finds nothing to rewrite...
  ExpectParityConsistent(a);
  // ...and losing m data chunks still reconstructs the patched data.
  auto servers = ServersOf(a, 0);
  SetDown(servers[3], true);
  SetDown(servers[0], true);
  EXPECT_EQ(ReadAll(a), base);
  EXPECT_GT(client().counters().degraded_reads, 0u);
}

TEST_F(StripeClientTest, SmallOverwriteMovesOnlyTheChangedWindow) {
  // 4+2, 64 KiB cells: a 4 KiB overwrite inside one cell reads and patches
  // 4 KiB of that data chunk and of each parity chunk, not whole chunks.
  Open(6, Geometry{4, 2, 65536});
  const uint64_t a = NewFile("a");
  auto base = RandomBytes(S(), 1);
  ASSERT_TRUE(client().Write(a, 0, base).ok());
  const auto before = client().counters();
  auto patch = RandomBytes(4096, 2);
  const uint64_t at = 65536 * 2 + 8192 + 7;
  ASSERT_TRUE(client().Write(a, at, patch).ok());
  auto c = client().counters();
  EXPECT_EQ(c.parity_delta_updates - before.parity_delta_updates, 1u);
  EXPECT_EQ(c.rmw_stripes - before.rmw_stripes, 0u);
  EXPECT_EQ(c.rmw_bytes_read - before.rmw_bytes_read, 3u * 4096u);
  std::copy(patch.begin(), patch.end(), base.begin() + at);
  EXPECT_EQ(ReadAll(a), base);
  // parity consistent with the patched data
  ExpectParityConsistent(a);
  // With the touched chunk's server down, the window is reconstructed, the
  // stripe commits degraded, and every byte still reads back.
  auto servers = ServersOf(a, 0);
  SetDown(servers[2], true);
  auto patch2 = RandomBytes(100, 3);
  ASSERT_TRUE(client().Write(a, at + 10, patch2).ok());
  std::copy(patch2.begin(), patch2.end(), base.begin() + at + 10);
  EXPECT_EQ(ReadAll(a), base);
  SetDown(servers[2], false);
  SetDown(servers[5], true);  // a parity server now: data chunk 2 is missing
  EXPECT_EQ(ReadAll(a), base);
}

TEST_F(StripeClientTest, LosingARaceWithAnotherClientRetriesOnTheNewVersion) {
  Open(6, Geometry{4, 2, 65536});
  const uint64_t a = NewFile("a");
  ASSERT_TRUE(client().Write(a, 0, RandomBytes(S(), 1)).ok());
  // Client B: same metadata and chunk stores, its own wrappers and client.
  std::vector<std::unique_ptr<ChunkService>> wrappers;
  std::vector<FaultInjectingChunkService*> b_faults;
  for (size_t i = 0; i < vol_->servers(); ++i) {
    auto w = std::make_unique<FaultInjectingChunkService>(&vol_->store(i));
    b_faults.push_back(w.get());
    wrappers.push_back(std::move(w));
  }
  LocalChunkServers b_servers(std::move(wrappers));
  auto b = StripeClient::Create(&meta(), &b_servers);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // The moment B reads the version it is about to patch, A rewrites the
  // whole stripe: A commits and garbage-collects B's base version.
  auto other = RandomBytes(S(), 2);
  std::atomic<bool> fired{false};
  Status a_write;
  for (auto* f : b_faults) {
    f->before_read = [&] {
      if (!fired.exchange(true)) a_write = client().Write(a, 0, other);
    };
  }
  auto patch = RandomBytes(4096, 3);
  Status st = (*b)->Write(a, 3 * 4096, patch);
  ASSERT_TRUE(fired.load());
  ASSERT_TRUE(a_write.ok()) << a_write.ToString();
  ASSERT_TRUE(st.ok()) << st.ToString();  // B retried on A's version
  EXPECT_GE((*b)->counters().commit_conflicts, 1u);
  std::copy(patch.begin(), patch.end(), other.begin() + 3 * 4096);
  // A sees B's commit once it forgets its map (the file system does that
  // when an open finds the file's change marker moved).
  client().ForgetStripeMap(a);
  EXPECT_EQ(ReadAll(a), other);
}

TEST_F(StripeClientTest, SmallFilesStoreShortChunks) {
  const uint64_t ino = NewFile("small");
  auto data = RandomBytes(100, 3);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  EXPECT_EQ(ReadAll(ino), data);
  auto sv = meta().GetStripes(ino, 0, 1);
  ASSERT_EQ(sv->size(), 1u);
  EXPECT_EQ(sv->front().chunk_len, 100u);
  // Grow within the stripe: bytes between read as zeros.
  auto more = RandomBytes(50, 4);
  ASSERT_TRUE(client().Write(ino, 9000, more).ok());
  std::vector<uint8_t> model(9050, 0);
  std::copy(data.begin(), data.end(), model.begin());
  std::copy(more.begin(), more.end(), model.begin() + 9000);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, SurvivesUpToMServersDown) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(3 * S() + 123, 7);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  auto servers = ServersOf(ino, 1);
  SetDown(servers[0], true);
  SetDown(servers[5], true);
  EXPECT_EQ(ReadAll(ino), data);
  // Writes while m are down commit degraded; data stays readable.
  auto patch = RandomBytes(S() / 2, 8);
  ASSERT_TRUE(client().Write(ino, S() + 10, patch).ok());
  std::copy(patch.begin(), patch.end(),
            data.begin() + static_cast<long>(S() + 10));
  EXPECT_EQ(ReadAll(ino), data);
  EXPECT_GT(client().counters().degraded_writes, 0u);
  auto sv = meta().GetStripes(ino, 1, 1);
  EXPECT_NE(sv->front().missing_mask, 0u);
  // Servers come back: repair fills the missing chunks and clears the mask.
  SetDown(servers[0], false);
  SetDown(servers[5], false);
  auto fixed = RepairStripe(client(), ino, sv->front(), false);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(*fixed, 2u);
  EXPECT_EQ(meta().GetStripes(ino, 1, 1)->front().missing_mask, 0u);
  // Now any other two may fail.
  SetDown(servers[1], true);
  SetDown(servers[2], true);
  EXPECT_EQ(ReadAll(ino), data);
}

// A stripe committed degraded because a store refused its chunk for space
// is healed by the client itself once the store takes writes again: no
// `stripefs repair`, the missing mask cleared, every chunk really there.
TEST_F(StripeClientTest,
       DegradedCommitIsRepairedInTheBackgroundOnceSpaceIsBack) {
  StripeClientOptions co;
  co.degraded_queue.initial_backoff = std::chrono::milliseconds(20);
  co.degraded_queue.max_backoff = std::chrono::milliseconds(100);
  Open(8, Geometry{4, 2, 4096}, co);
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(3 * S(), 31);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  const std::vector<uint32_t> servers = ServersOf(ino, 1);
  faults_[servers[2]]->fail_writes = true;  // ENOSPC: its reserve is hit
  auto patch = RandomBytes(S(), 32);
  ASSERT_TRUE(client().Write(ino, S(), patch).ok());
  std::copy(patch.begin(), patch.end(), model.begin() + static_cast<long>(S()));
  auto sv = meta().GetStripes(ino, 1, 1);
  ASSERT_TRUE(sv.ok());
  EXPECT_EQ(sv->front().missing_mask, ChunkBit(2));
  auto c = client().counters();
  EXPECT_EQ(c.degraded_writes, 1u);
  EXPECT_EQ(c.degraded_queued, 1u);
  // Still full: several retries (20..100 ms apart) fail, it stays queued.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  c = client().counters();
  EXPECT_EQ(c.degraded_repaired, 0u);
  EXPECT_EQ(c.still_degraded, 1u);
  EXPECT_EQ(meta().GetStripes(ino, 1, 1)->front().missing_mask, ChunkBit(2));
  // Space is back: healed within a bounded wait.
  faults_[servers[2]]->fail_writes = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (client().counters().degraded_repaired == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  c = client().counters();
  ASSERT_EQ(c.degraded_repaired, 1u) << "not repaired within 10 s";
  EXPECT_EQ(c.still_degraded, 0u);
  EXPECT_EQ(c.degraded_queue_overflow, 0u);
  EXPECT_EQ(meta().GetStripes(ino, 1, 1)->front().missing_mask, 0u);
  EXPECT_EQ(ReadAll(ino), model);
  // Chunk 2 is really back: with two other chunks of stripe 1 gone, the
  // stripe is only readable through it.
  SetDown(servers[0], true);
  SetDown(servers[1], true);
  EXPECT_EQ(ReadAll(ino), model);
  SetDown(servers[0], false);
  SetDown(servers[1], false);
  // A commit degraded by a server that is down is not queued: that is for
  // `stripefs repair` once the server is back or marked out.
  SetDown(servers[3], true);
  ASSERT_TRUE(client().Write(ino, S(), patch).ok());
  c = client().counters();
  EXPECT_EQ(c.degraded_writes, 2u);
  EXPECT_EQ(c.degraded_queued, 1u);
  EXPECT_EQ(c.still_degraded, 0u);
  SetDown(servers[3], false);
}

// degraded_writes=refuse: a chunk refused for space fails the write with
// ENOSPC, nothing committed, the old version readable; a degraded commit
// for another cause (a server down) still goes through.
TEST_F(StripeClientTest, RefuseDegradedEnospcFailsTheWriteAndKeepsOldData) {
  StripeClientOptions co;
  co.refuse_degraded_enospc = true;
  Open(8, Geometry{4, 2, 4096}, co);
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(2 * S(), 41);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  const uint64_t before = meta().GetStripes(ino, 0, 1)->front().version;
  const std::vector<uint32_t> servers = ServersOf(ino, 0);
  faults_[servers[4]]->fail_writes = true;
  Status st = client().Write(ino, 0, RandomBytes(S(), 42));
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  // The fsync path (WriteStripes, several stripes) refuses as well, and
  // commits none of them.
  std::vector<uint8_t> two = RandomBytes(2 * S(), 43);
  std::vector<StripeWriteRequest> reqs(2);
  for (uint64_t s = 0; s < 2; ++s) {
    reqs[s].ino = ino;
    reqs[s].stripe = s;
    reqs[s].bytes = std::span<const uint8_t>(two).subspan(s * S(), S());
    reqs[s].ranges = {{0, static_cast<uint32_t>(S())}};
    reqs[s].min_file_size = 2 * S();
  }
  EXPECT_EQ(client().WriteStripes(reqs).code(), ENOSPC);
  auto c = client().counters();
  // One per refused stripe: stripe 0, and stripe 1 if the placement puts a
  // chunk of it on the same server.
  const std::vector<uint32_t> next = ServersOf(ino, 1);
  const uint64_t second =
      std::count(next.begin(), next.end(), servers[4]) > 0 ? 1 : 0;
  EXPECT_EQ(c.degraded_refused, 2u + second);
  EXPECT_EQ(c.degraded_writes, 0u);
  EXPECT_EQ(c.degraded_queued, 0u);
  EXPECT_EQ(meta().GetStripes(ino, 0, 1)->front().version, before);
  EXPECT_EQ(meta().GetStripes(ino, 0, 1)->front().missing_mask, 0u);
  EXPECT_EQ(ReadAll(ino), model);
  faults_[servers[4]]->fail_writes = false;
  // Not for space: a server down still commits degraded.
  SetDown(servers[4], true);
  auto patch = RandomBytes(S(), 44);
  ASSERT_TRUE(client().Write(ino, 0, patch).ok());
  std::copy(patch.begin(), patch.end(), model.begin());
  EXPECT_EQ(client().counters().degraded_writes, 1u);
  EXPECT_EQ(ReadAll(ino), model);
  SetDown(servers[4], false);
}

TEST_F(StripeClientTest, MoreThanMFailuresIsEioAndKeepsOldData) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(S(), 9);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  auto servers = ServersOf(ino, 0);
  for (int i = 0; i < 3; ++i)
    faults_[servers[static_cast<size_t>(i)]]->fail_writes = true;
  Status st = client().Write(ino, 0, RandomBytes(S(), 10));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ENOSPC);  // the injected cause is what the user sees
  EXPECT_NE(st.message().find("previous data kept"), std::string::npos);
  EXPECT_EQ(client().counters().failed_writes, 1u);
  EXPECT_EQ(ReadAll(ino), data);
  // m+1 servers down: reads fail cleanly, then work again after restart.
  for (int i = 0; i < 3; ++i)
    faults_[servers[static_cast<size_t>(i)]]->fail_writes = false;
  for (int i = 0; i < 3; ++i) SetDown(servers[static_cast<size_t>(i)], true);
  Status rst;
  ReadAll(ino, &rst);
  EXPECT_EQ(rst.code(), EIO);
  for (int i = 0; i < 3; ++i) SetDown(servers[static_cast<size_t>(i)], false);
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(StripeClientTest, CorruptChunkIsRebuiltNotReturned) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(S(), 11);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  auto sv = meta().GetStripes(ino, 0, 1)->front();
  auto servers = ServersOf(ino, 0);
  // Flip a bit in data chunk 1's bytes.
  auto loc = vol_->store(servers[1]).Locate({ino, 0, 1}, sv.version);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  {
    const auto at = static_cast<std::streamoff>(loc->offset + 17);
    std::fstream f(loc->path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << loc->path;
    f.seekg(at);
    char b;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x10);
    f.seekp(at);
    f.write(&b, 1);
  }
  EXPECT_EQ(ReadAll(ino), data);
  EXPECT_GE(client().counters().crc_errors, 1u);
  auto fixed = RepairStripe(client(), ino, sv, true);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(*fixed, 1u);
  auto again = RepairStripe(client(), ino, sv, true);
  EXPECT_EQ(*again, 0u);
}

TEST_F(StripeClientTest, RepairAfterServerMarkedOutRestoresRedundancy) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(6 * S(), 12);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  // Server 3 dies for good and is marked out.
  faults_[3]->down = true;
  ASSERT_TRUE(meta().SetServerState(3, ServerState::kOut).ok());
  ASSERT_TRUE(client().RefreshClusterMap().ok());
  // Still readable before repair: only chunks on server 3 moved.
  EXPECT_EQ(ReadAll(ino), data);
  uint32_t rebuilt = 0;
  auto stripes = meta().ListStripes(0, 0, 1000);
  for (const auto& ref : *stripes) {
    auto n = RepairStripe(client(), ref.inode, ref.sv, false);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    rebuilt += *n;
  }
  EXPECT_GT(rebuilt, 0u);
  // Full redundancy: any two further servers of a stripe may fail.
  for (uint64_t s = 0; s < 6; ++s) {
    auto servers = ServersOf(ino, s);
    SetDown(servers[0], true);
    SetDown(servers[4], true);
    std::vector<uint8_t> buf(S());
    auto n = client().Read(ino, s * S(), buf, Size(ino));
    ASSERT_TRUE(n.ok()) << "stripe " << s << ": " << n.status().ToString();
    EXPECT_TRUE(std::equal(buf.begin(), buf.end(),
                           data.begin() + static_cast<long>(s * S())));
    SetDown(servers[0], false);
    SetDown(servers[4], false);
  }
}

TEST_F(StripeClientTest, TruncateZeroesTheTail) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(3 * S(), 13);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  const uint64_t cut = S() + 777;
  auto attr = client().Truncate(ino, Size(ino), cut);
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_EQ(attr->size, cut);
  EXPECT_EQ(meta().GetStripes(ino, 0, 10)->size(), 2u);
  ASSERT_TRUE(client().Truncate(ino, cut, 3 * S()).ok());
  std::vector<uint8_t> model(3 * S(), 0);
  std::copy(data.begin(), data.begin() + static_cast<long>(cut), model.begin());
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, ConcurrentWritersOnOneFileAndMany) {
  const uint64_t shared = NewFile("shared");
  std::vector<uint64_t> own;
  for (int t = 0; t < 4; ++t) own.push_back(NewFile("own" + std::to_string(t)));
  std::vector<std::vector<uint8_t>> blocks;
  for (int t = 0; t < 4; ++t)
    blocks.push_back(RandomBytes(2 * S() + 5, 20u + static_cast<uint32_t>(t)));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Interleaved, overlapping-stripe writes to the shared file.
      for (int r = 0; r < 5; ++r) {
        uint64_t off = static_cast<uint64_t>(t) * (2 * S() + 5);
        if (!client().Write(shared, off, blocks[static_cast<size_t>(t)]).ok())
          ++errors;
        if (!client()
                 .Write(own[static_cast<size_t>(t)], 0,
                        blocks[static_cast<size_t>(t)])
                 .ok())
          ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  std::vector<uint8_t> model;
  for (auto& b : blocks) model.insert(model.end(), b.begin(), b.end());
  EXPECT_EQ(ReadAll(shared), model);
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(ReadAll(own[static_cast<size_t>(t)]),
              blocks[static_cast<size_t>(t)]);
}

// --- one version per flush -------------------------------------------------

// Applies the ranges of `buf` to `model` (stripe `s`).
void ApplyRanges(std::vector<uint8_t>* model, uint64_t base,
                 const std::vector<uint8_t>& buf,
                 const std::vector<StripeRange>& ranges) {
  for (const auto& r : ranges) {
    if (model->size() < base + r.end) model->resize(base + r.end, 0);
    std::copy(buf.begin() + r.begin, buf.begin() + r.end,
              model->begin() + static_cast<long>(base + r.begin));
  }
}

TEST_F(StripeClientTest, ManyRangeFlushOfAStripeIsOneVersionAndOneCommit) {
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(2 * S(), 1);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  // A buffer of stripe 1 with three valid ranges; the gaps hold junk that
  // must not be written.
  auto buf = RandomBytes(S(), 2);
  const std::vector<StripeRange> ranges = {
      {100, 200}, {5000, 6000}, {9000, static_cast<uint32_t>(S()) - 1}};
  const int commits = counting_->commit_calls;
  const int writes = ChunkWrites();
  const auto before = client().counters();
  ASSERT_TRUE(client().WriteStripe(ino, 1, buf, ranges, 2 * S()).ok());
  EXPECT_EQ(counting_->commit_calls - commits, 1);
  EXPECT_EQ(ChunkWrites() - writes, 6);  // k+m chunks of one version
  const auto after = client().counters();
  EXPECT_EQ(after.rmw_stripes + after.parity_delta_updates -
                before.rmw_stripes - before.parity_delta_updates,
            1u);
  ApplyRanges(&model, S(), buf, ranges);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, ManyRangeFlushOfANewStripeLeavesZeroGaps) {
  const uint64_t ino = NewFile("f");
  auto buf = RandomBytes(S(), 3);
  const std::vector<StripeRange> ranges = {
      {10, 20}, {4096, 4100}, {9000, 9001}};
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf, ranges, 9001).ok());
  EXPECT_EQ(counting_->stripes_committed, 1);
  EXPECT_EQ(client().counters().new_partial_stripes, 1u);
  std::vector<uint8_t> model;
  ApplyRanges(&model, 0, buf, ranges);
  EXPECT_EQ(Size(ino), 9001u);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, TwoRangesInOneCellUseOneParityDelta) {
  Open(12, Geometry{8, 2, 4096});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(S(), 4);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  auto buf = RandomBytes(S(), 5);
  const std::vector<StripeRange> ranges = {{3 * 4096 + 10, 3 * 4096 + 90},
                                           {3 * 4096 + 400, 3 * 4096 + 500}};
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf, ranges, S()).ok());
  EXPECT_EQ(client().counters().parity_delta_updates, 1u);
  ApplyRanges(&model, 0, buf, ranges);
  EXPECT_EQ(ReadAll(ino), model);
  // Parity is right: every stripe verifies under scrub.
  ExpectParityConsistent(ino);
}

TEST_F(StripeClientTest, SmallRangesInSeveralCellsTakeOneDeltaVersion) {
  // 4+2, 64 KiB cells: four 4 KiB ranges in three cells read each cell's
  // own window plus the parity windows (their union), not k whole chunks.
  Open(6, Geometry{4, 2, 65536});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(S(), 6);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  auto buf = RandomBytes(S(), 7);
  const std::vector<StripeRange> ranges = {
      {1000, 5096},
      {65536 + 20000, 65536 + 24096},
      {3 * 65536 + 30000, 3 * 65536 + 34096},
      {3 * 65536 + 50000, 3 * 65536 + 54096}};
  uint64_t read = 0;
  ASSERT_NO_FATAL_FAILURE(WriteOneDelta(ino, buf, ranges, &read));
  // Cells 0, 1, 3: 4096 + 4096 + 2 x 4096 bytes (cell 3's two ranges are
  // two windows, not their span); parity: the four 4 KiB column intervals
  // (over 4 KiB apart), not their span [1000, 54096), twice.
  EXPECT_EQ(read, 4096u + 4096u + 2u * 4096u + 2u * 4u * 4096u);
  ApplyRanges(&model, 0, buf, ranges);
  EXPECT_EQ(ReadAll(ino), model);
  // parity consistent with every patched cell
  ExpectParityConsistent(ino);
  // A server of a touched cell down: its window is reconstructed.
  SetDown(ServersOf(ino, 0)[1], true);
  auto buf2 = RandomBytes(S(), 8);
  const std::vector<StripeRange> again = {{65536 + 100, 65536 + 200},
                                          {2 * 65536 + 7, 2 * 65536 + 9}};
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf2, again, S()).ok());
  ApplyRanges(&model, 0, buf2, again);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, DeltaReadsEachWindowOnceInOneRound) {
  // Cells 0, 1 and 3 touched: four cell windows (two in cell 3) and four
  // parity windows (the touched column intervals). With bounded reads
  // every window is one read (4 data + 2 x 4 parity), all handed out
  // together; nothing goes through the general path.
  Open(6, Geometry{4, 2, 65536});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(S(), 16);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  for (auto* f : faults_) f->bounded = true;
  auto buf = RandomBytes(S(), 17);
  const std::vector<StripeRange> ranges = {
      {1000, 5096},
      {65536 + 20000, 65536 + 24096},
      {3 * 65536 + 30000, 3 * 65536 + 34096},
      {3 * 65536 + 50000, 3 * 65536 + 54096}};
  auto count = [&](std::atomic<int> testing::FaultInjectingChunkService::*c) {
    int n = 0;
    for (auto* f : faults_) n += (f->*c).load();
    return n;
  };
  const int bounded0 =
      count(&testing::FaultInjectingChunkService::bounded_reads);
  const int reads0 = count(&testing::FaultInjectingChunkService::reads);
  const auto before = client().counters();
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf, ranges, S()).ok());
  const auto after = client().counters();
  EXPECT_EQ(after.parity_delta_updates - before.parity_delta_updates, 1u);
  EXPECT_EQ(
      count(&testing::FaultInjectingChunkService::bounded_reads) - bounded0,
      12);
  // ReadChunk calls: only the wrapper's own patches and clones (the default
  // PatchChunk / PatchChunkRanges / CloneChunk read their source once each:
  // k + m = 6 ops); the general read path would add its window reads.
  EXPECT_EQ(count(&testing::FaultInjectingChunkService::reads) - reads0, 6);
  EXPECT_EQ(after.rmw_bytes_read - before.rmw_bytes_read,
            4096u + 4096u + 2u * 4096u + 2u * 4u * 4096u);
  ApplyRanges(&model, 0, buf, ranges);
  EXPECT_EQ(ReadAll(ino), model);
  // parity consistent with every patched cell
  ExpectParityConsistent(ino);

  // A touched cell's server down: the round cannot be made as is, so the
  // windows are read (and the lost one reconstructed) the general way.
  SetDown(ServersOf(ino, 0)[3], true);
  auto buf2 = RandomBytes(S(), 18);
  const std::vector<StripeRange> again = {{100, 200},
                                          {3 * 65536 + 7, 3 * 65536 + 4000}};
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf2, again, S()).ok());
  ApplyRanges(&model, 0, buf2, again);
  EXPECT_EQ(ReadAll(ino), model);
}

// Row e of bench write in small: 4 KiB writes at random columns of
// different cells of a 4+2 stripe of 256 KiB cells. Parity changes only at
// the union of the touched column intervals, so the delta reads and
// patches those intervals of each parity chunk (one multi-range patch, one
// new version), not the span from the first to the last touched column.
TEST_F(StripeClientTest, SparseDeltaReadsAndPatchesOnlyTheTouchedIntervals) {
  Open(6, Geometry{4, 2, 262144});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(S(), 30);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  const uint64_t c = 262144;
  // Columns [8192, 12288), [10000, 14096) (overlapping: one interval
  // [8192, 14096)), [16384, 20480) (2288 columns after it: merged), and
  // [200000, 204096) apart: two parity windows, 12288 + 4096 bytes, where
  // the span would be [8192, 204096) = 195904 bytes.
  const std::vector<StripeRange> ranges = {{8192, 12288},
                                           {c + 10000, c + 14096},
                                           {2 * c + 16384, 2 * c + 20480},
                                           {3 * c + 200000, 3 * c + 204096}};
  auto buf = RandomBytes(S(), 31);
  uint64_t read = 0;
  ASSERT_NO_FATAL_FAILURE(WriteOneDelta(ino, buf, ranges, &read));
  const uint64_t cells = 4 * 4096;
  const uint64_t span = 2 * (204096 - 8192);
  EXPECT_EQ(read, cells + 2 * (12288 + 4096));
  EXPECT_LT(read, (cells + span) / 5);
  ApplyRanges(&model, 0, buf, ranges);
  EXPECT_EQ(ReadAll(ino), model);
  // parity consistent at and between the windows
  ExpectParityConsistent(ino);

  // Two far ranges in one cell: that cell and parity read two 4 KiB
  // windows each, where the span would be ~190 KiB each.
  const std::vector<StripeRange> same_cell = {{c + 4096, c + 8192},
                                              {c + 196608, c + 200704}};
  auto buf1 = RandomBytes(S(), 33);
  const uint64_t read0 = client().counters().rmw_bytes_read;
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf1, same_cell, S()).ok());
  EXPECT_EQ(client().counters().rmw_bytes_read - read0, 3u * 2u * 4096u);
  ApplyRanges(&model, 0, buf1, same_cell);
  EXPECT_EQ(ReadAll(ino), model);
  ExpectParityConsistent(ino);

  // One touched cell's server down: its window and the parity windows are
  // reconstructed (the general read path, several windows per parity
  // chunk); the new version commits degraded and reads back.
  SetDown(ServersOf(ino, 0)[2], true);
  auto buf2 = RandomBytes(S(), 32);
  const std::vector<StripeRange> again = {{c + 500, c + 600},
                                          {2 * c + 100000, 2 * c + 104096},
                                          {3 * c + 250000, 3 * c + 250100}};
  ASSERT_TRUE(client().WriteStripe(ino, 0, buf2, again, S()).ok());
  ApplyRanges(&model, 0, buf2, again);
  EXPECT_EQ(ReadAll(ino), model);
  // Back up: a repair rebuilds the missing chunk, and the stripe verifies.
  SetDown(ServersOf(ino, 0)[2], false);
  auto sv = meta().GetStripes(ino, 0, 1);
  EXPECT_EQ(sv->front().missing_mask, ChunkBit(2));
  auto rebuilt = RepairStripe(client(), ino, sv->front(), /*verify=*/false);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ(*rebuilt, 1u);
  ExpectParityConsistent(ino);
  EXPECT_EQ(ReadAll(ino), model);
}

// Requests for stripes 0..7 of an 8-stripe file, two small ranges each,
// from fresh random buffers (kept in *bufs, seeded seed + stripe).
std::vector<StripeWriteRequest> EightSmallStripeWrites(
    uint64_t ino, uint64_t stripe_size, uint32_t seed,
    std::vector<std::vector<uint8_t>>* bufs) {
  std::vector<StripeWriteRequest> reqs(8);
  for (uint64_t s = 0; s < 8; ++s)
    bufs->push_back(RandomBytes(stripe_size, seed + s));
  for (uint64_t s = 0; s < 8; ++s) {
    reqs[s].ino = ino;
    reqs[s].stripe = s;
    reqs[s].bytes = (*bufs)[s];
    reqs[s].ranges = {{10, 20}, {4096 + 5, 4096 + 50}};
    reqs[s].min_file_size = 8 * stripe_size;
  }
  return reqs;
}

TEST_F(StripeClientTest, WriteStripesMakesEveryStripeBeforeOneCommit) {
  // Eight dirty stripes at once (an fsync): one metadata commit and one
  // new version each (two small ranges per stripe: one delta, not two).
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(8 * S(), 9);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<StripeWriteRequest> reqs =
      EightSmallStripeWrites(ino, S(), 20, &bufs);
  const int commits = counting_->commit_calls;
  const int committed = counting_->stripes_committed;
  ASSERT_TRUE(client().WriteStripes(reqs).ok());
  EXPECT_EQ(counting_->commit_calls - commits, 1);
  EXPECT_EQ(counting_->stripes_committed - committed, 8);
  for (uint64_t s = 0; s < 8; ++s)
    ApplyRanges(&model, s * S(), bufs[s], reqs[s].ranges);
  EXPECT_EQ(ReadAll(ino), model);
  client().DrainGarbage();
  EXPECT_EQ(StoredChunks(), 8u * 6u);  // one version per stripe is left
}

// An fsync's stripes go out as one ApplyChunkOps request per server; a
// failed op of that batch counts against its own stripe only: up to m
// commit that stripe degraded, more fail the whole WriteStripes and
// nothing commits.
TEST_F(StripeClientTest, WriteStripesBatchesPerServerAndMapsPerOpFailures) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(8 * S(), 9);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<StripeWriteRequest> reqs =
      EightSmallStripeWrites(ino, S(), 40, &bufs);
  // Stripe 3's chunk 1 fails on its server (ENOSPC there), nothing else.
  const uint32_t bad_server = ServersOf(ino, 3)[1];
  faults_[bad_server]->write_fault = [ino](const ChunkId& id) {
    return id.inode == ino && id.stripe == 3 && id.index == 1
               ? Status::NoSpace("injected: this chunk's disk is full")
               : Status::Ok();
  };
  std::vector<int> batches;
  for (auto* f : faults_) batches.push_back(f->op_batches);
  const int commits = counting_->commit_calls;
  ASSERT_TRUE(client().WriteStripes(reqs).ok());
  EXPECT_EQ(counting_->commit_calls - commits, 1);
  for (size_t i = 0; i < faults_.size(); ++i) {
    // Every server holds a chunk of each stripe: one request each.
    EXPECT_EQ(faults_[i]->op_batches - batches[i], 1) << "server " << i;
  }
  for (uint64_t s = 0; s < 8; ++s) {
    auto sv = meta().GetStripes(ino, s, 1);
    ASSERT_TRUE(sv.ok());
    EXPECT_EQ(sv->front().missing_mask, s == 3 ? ChunkBit(1) : 0u)
        << "stripe " << s;
    ApplyRanges(&model, s * S(), bufs[s], reqs[s].ranges);
  }
  EXPECT_EQ(ReadAll(ino), model);

  // Three of stripe 5's chunks fail: more than m, so none of the eight
  // commits and the data stays as it was.
  for (auto* f : faults_) f->write_fault = nullptr;
  std::vector<uint32_t> five = ServersOf(ino, 5);
  for (uint32_t idx : {0u, 2u, 4u}) {
    faults_[five[idx]]->write_fault = [ino, idx](const ChunkId& id) {
      return id.inode == ino && id.stripe == 5 && id.index == idx
                 ? Status::IoError("injected: chunk write failed")
                 : Status::Ok();
    };
  }
  for (uint64_t s = 0; s < 8; ++s) bufs[s] = RandomBytes(S(), 60 + s);
  for (uint64_t s = 0; s < 8; ++s) reqs[s].bytes = bufs[s];
  const int commits2 = counting_->commit_calls;
  EXPECT_EQ(client().WriteStripes(reqs).code(), EIO);
  EXPECT_EQ(counting_->commit_calls - commits2, 0);
  for (auto* f : faults_) f->write_fault = nullptr;
  EXPECT_EQ(ReadAll(ino), model);
}

// The old windows of an fsync's deltas are read with the wave's other
// stripes: one ReadChunkRanges call per server for all eight stripes.
// When a server cannot serve its part (down: the batch fails there), the
// stripes that needed it read again the general way, reconstructing the
// lost windows, and commit degraded; the data and parity stay right.
TEST_F(StripeClientTest, WriteStripesReadsTheWavesWindowsOncePerServer) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(8 * S(), 30);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  for (auto* f : faults_) f->bounded = true;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<StripeWriteRequest> reqs =
      EightSmallStripeWrites(ino, S(), 31, &bufs);
  std::vector<int> batches, batched;
  for (auto* f : faults_) {
    batches.push_back(f->range_batches);
    batched.push_back(f->batched_reads);
  }
  const auto before = client().counters();
  ASSERT_TRUE(client().WriteStripes(reqs).ok());
  const auto after = client().counters();
  EXPECT_EQ(after.parity_delta_updates - before.parity_delta_updates, 8u);
  int windows = 0;
  for (size_t i = 0; i < faults_.size(); ++i) {
    // Each stripe touches cells 0 and 1 and reads both parities: every
    // server holds a chunk of each stripe, so at most one call each.
    EXPECT_LE(faults_[i]->range_batches - batches[i], 1) << "server " << i;
    windows += faults_[i]->batched_reads - batched[i];
  }
  EXPECT_EQ(windows, 8 * 4);  // 2 cell windows + 2 parity windows a stripe
  for (uint64_t s = 0; s < 8; ++s)
    ApplyRanges(&model, s * S(), bufs[s], reqs[s].ranges);
  EXPECT_EQ(ReadAll(ino), model);
  ExpectParityConsistent(ino);

  // Stripe 2's cell-0 server down: every stripe with a chunk there reads
  // around it and commits without it.
  const uint32_t down = ServersOf(ino, 2)[0];
  SetDown(down, true);
  for (uint64_t s = 0; s < 8; ++s) bufs[s] = RandomBytes(S(), 40 + s);
  for (uint64_t s = 0; s < 8; ++s) reqs[s].bytes = bufs[s];
  ASSERT_TRUE(client().WriteStripes(reqs).ok());
  for (uint64_t s = 0; s < 8; ++s)
    ApplyRanges(&model, s * S(), bufs[s], reqs[s].ranges);
  auto sv = meta().GetStripes(ino, 2, 1);
  ASSERT_TRUE(sv.ok());
  EXPECT_EQ(sv->front().missing_mask, ChunkBit(0));
  EXPECT_EQ(ReadAll(ino), model);
  SetDown(down, false);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, BadRangesAreRejectedAndNothingIsCommitted) {
  const uint64_t ino = NewFile("f");
  auto buf = RandomBytes(S(), 6);
  const uint32_t s = static_cast<uint32_t>(S());
  for (const auto& bad :
       std::vector<std::vector<StripeRange>>{{{10, 10}},
                                             {{20, 30}, {25, 40}},
                                             {{50, 60}, {10, 20}},
                                             {{0, s + 1}},
                                             {}}) {
    Status st = client().WriteStripe(ino, 0, buf, bad, 0);
    EXPECT_EQ(st.code(), EINVAL) << st.ToString();
  }
  // A range past the end of the given buffer.
  Status st =
      client().WriteStripe(ino, 0, std::span(buf).first(100), {{50, 150}}, 0);
  EXPECT_EQ(st.code(), EINVAL);
  EXPECT_EQ(counting_->commit_calls, 0);
  EXPECT_TRUE(meta().GetStripes(ino, 0, 1)->empty());
}

TEST(StripeWritePlanTest, KindFollowsBaseAndRanges) {
  const StripeGeometry geo(Geometry{8, 2, 4096});
  const uint32_t S = static_cast<uint32_t>(geo.stripe_size());
  StripeWriteRequest req;
  req.ranges = {{0, S}};
  EXPECT_EQ(PlanStripeWrite(geo, true, nullptr, req).kind, WriteKind::kFull);
  req.ranges = {{10, 20}, {5000, 6000}};
  WritePlan p = PlanStripeWrite(geo, true, nullptr, req);
  EXPECT_EQ(p.kind, WriteKind::kNewPartial);
  EXPECT_EQ(p.chunk_len, 4096u);
  EXPECT_EQ(p.touched, 0b11u);
  StripeVersion base{0, 7, 0, 4096};
  // Two cells of eight: (2 + 2) windows of 4096 < 8 * 4096: delta.
  EXPECT_EQ(PlanStripeWrite(geo, true, &base, req).kind, WriteKind::kDelta);
  EXPECT_EQ(PlanStripeWrite(geo, false, &base, req).kind, WriteKind::kRmw);
  // One cell: the window is the touched columns only.
  req.ranges = {{4096 + 10, 4096 + 20}, {4096 + 100, 4096 + 300}};
  p = PlanStripeWrite(geo, true, &base, req);
  EXPECT_EQ(p.kind, WriteKind::kDelta);
  ASSERT_EQ(p.parity_windows.size(), 1u);  // 80 columns apart: one window
  EXPECT_EQ(p.parity_windows[0].lo, 10u);
  EXPECT_EQ(p.parity_windows[0].hi, 300u);
  ASSERT_EQ(p.cell_windows[1].size(), 1u);
  EXPECT_EQ(p.cell_windows[1][0].lo, 10u);
  EXPECT_EQ(p.cell_windows[1][0].hi, 300u);
  EXPECT_TRUE(p.cell_windows[0].empty());  // untouched
  // Small ranges in several cells: each cell keeps its own window, parity
  // takes their union; 10 + 100 + 1000 + 2 * 1990 bytes < 8 * 4096: delta.
  req.ranges = {{0, 10},
                {2 * 4096 + 1900, 2 * 4096 + 2000},
                {5 * 4096 + 1000, 5 * 4096 + 2000}};
  p = PlanStripeWrite(geo, true, &base, req);
  EXPECT_EQ(p.kind, WriteKind::kDelta);
  EXPECT_EQ(p.touched, 0b100101u);
  ASSERT_EQ(p.cell_windows[2].size(), 1u);
  EXPECT_EQ(p.cell_windows[2][0].lo, 1900u);
  EXPECT_EQ(p.cell_windows[2][0].hi, 2000u);
  EXPECT_EQ(p.cell_windows[5][0].lo, 1000u);
  ASSERT_EQ(p.parity_windows.size(), 1u);
  EXPECT_EQ(p.parity_windows[0].lo, 0u);
  EXPECT_EQ(p.parity_windows[0].hi, 2000u);
  // Far apart in 256 KiB cells: one parity window per interval, and the
  // delta's bytes count the windows, not their span.
  {
    const StripeGeometry big(Geometry{4, 2, 262144});
    const uint32_t c = 262144;
    StripeVersion big_base{0, 7, 0, c};
    StripeWriteRequest r;
    r.ranges = {{100000, 104096},
                {c + 0, c + 4096},
                {2 * c + 8000, 2 * c + 9000},
                {3 * c + 250000, 3 * c + 254096}};
    WritePlan q = PlanStripeWrite(big, true, &big_base, r);
    EXPECT_EQ(q.kind, WriteKind::kDelta);
    // [0, 4096) and [8000, 9000) are 3904 columns apart: merged.
    ASSERT_EQ(q.parity_windows.size(), 3u);
    EXPECT_EQ(q.parity_windows[0].lo, 0u);
    EXPECT_EQ(q.parity_windows[0].hi, 9000u);
    EXPECT_EQ(q.parity_windows[1].lo, 100000u);
    EXPECT_EQ(q.parity_windows[1].hi, 104096u);
    EXPECT_EQ(q.parity_windows[2].lo, 250000u);
    EXPECT_EQ(q.parity_windows[2].hi, 254096u);
    // Two far ranges in one cell: two windows of that cell, too.
    r.ranges = {{1000, 2000}, {200000, 204096}};
    q = PlanStripeWrite(big, true, &big_base, r);
    EXPECT_EQ(q.kind, WriteKind::kDelta);
    ASSERT_EQ(q.cell_windows[0].size(), 2u);
    EXPECT_EQ(q.cell_windows[0][1].lo, 200000u);
    EXPECT_EQ(q.parity_windows.size(), 2u);
  }
  // Seven cells touched: 7 * 4096 + 2 * 4096 > 8 * 4096: RMW.
  req.ranges = {{0, 7 * 4096}};
  EXPECT_EQ(PlanStripeWrite(geo, true, &base, req).kind, WriteKind::kRmw);
  // A degraded base never takes a delta.
  base.missing_mask = 1;
  req.ranges = {{10, 20}};
  EXPECT_EQ(PlanStripeWrite(geo, true, &base, req).kind, WriteKind::kRmw);
  // A short base grows: its chunk length changes, so RMW.
  StripeVersion short_base{0, 7, 0, 100};
  req.ranges = {{4096, 4097}};
  p = PlanStripeWrite(geo, true, &short_base, req);
  EXPECT_EQ(p.kind, WriteKind::kRmw);
  EXPECT_EQ(p.chunk_len, 4096u);
}

// --- one commit per multi-stripe write ------------------------------------

TEST(StripeWritePlanTest, MergeColumnWindowsUnitesAndCaps) {
  // Overlapping, touching and close windows merge; far ones stay apart;
  // empty ones vanish; order does not matter.
  auto got = MergeColumnWindows(
      {{500, 600}, {0, 100}, {90, 200}, {200, 300}, {7, 7}, {10000, 10010}},
      /*gap=*/100, /*max_windows=*/16);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].lo, 0u);
  EXPECT_EQ(got[0].hi, 300u);
  EXPECT_EQ(got[1].lo, 500u);  // 200 apart: not merged under gap 100
  EXPECT_EQ(got[2].lo, 10000u);
  // Gap 0: only overlapping windows merge ([0,100) and [100,200) touch
  // and stay two).
  got = MergeColumnWindows({{0, 100}, {100, 200}, {50, 60}}, 0, 16);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].lo, 100u);
  // Over the cap: the closest neighbours merge first.
  got = MergeColumnWindows({{0, 10}, {1000, 1010}, {1050, 1060}, {5000, 5010}},
                           0, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].hi, 1060u);
  EXPECT_EQ(got[1].lo, 5000u);
  EXPECT_TRUE(MergeColumnWindows({}, 4096, 16).empty());
}

TEST_F(StripeClientTest, MultiStripeWriteCommitsInOneMetadataCall) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(4 * S() + 100, 7);
  ASSERT_TRUE(client().Write(ino, 50, data).ok());  // touches 5 stripes
  EXPECT_EQ(counting_->commit_calls, 1);
  EXPECT_EQ(counting_->stripes_committed, 5);
  EXPECT_EQ(Size(ino), 50 + data.size());
  std::vector<uint8_t> model(50, 0);
  model.insert(model.end(), data.begin(), data.end());
  EXPECT_EQ(ReadAll(ino), model);
  // Overwrite: still one commit, and every old version is collected.
  auto again = RandomBytes(4 * S() + 100, 8);
  ASSERT_TRUE(client().Write(ino, 50, again).ok());
  EXPECT_EQ(counting_->commit_calls, 2);
  client().DrainGarbage();
  EXPECT_EQ(StoredChunks(), 5u * 6u);
  std::copy(again.begin(), again.end(), model.begin() + 50);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, WriteStripesFlushesPartialStripesWithOneCommit) {
  const uint64_t ino = NewFile("f");
  auto model = RandomBytes(3 * S(), 11);
  ASSERT_TRUE(client().Write(ino, 0, model).ok());
  const int commits = counting_->commit_calls;
  // Dirty ranges in stripes 0 and 2, and a new stripe 4: one call.
  std::vector<std::vector<uint8_t>> bufs = {
      RandomBytes(S(), 12), RandomBytes(S(), 13), RandomBytes(S(), 14)};
  std::vector<StripeWriteRequest> reqs(3);
  const uint64_t stripes[] = {0, 2, 4};
  const std::vector<StripeRange> ranges[] = {
      {{5, 50}, {7000, 9000}}, {{100, 101}}, {{0, 300}}};
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].ino = ino;
    reqs[i].stripe = stripes[i];
    reqs[i].bytes = bufs[i];
    reqs[i].ranges = ranges[i];
    reqs[i].min_file_size = stripes[i] * S() + ranges[i].back().end;
  }
  ASSERT_TRUE(client().WriteStripes(reqs).ok());
  EXPECT_EQ(counting_->commit_calls - commits, 1);
  for (size_t i = 0; i < reqs.size(); ++i)
    ApplyRanges(&model, stripes[i] * S(), bufs[i], ranges[i]);
  EXPECT_EQ(Size(ino), 4 * S() + 300);
  EXPECT_EQ(ReadAll(ino), model);
}

TEST_F(StripeClientTest, MultiStripeWriteFallsBackWithoutBatchCommits) {
  counting_->batch_unsupported = true;
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(3 * S(), 9);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  EXPECT_EQ(counting_->commit_calls, 3);  // one CommitStripe per stripe
  EXPECT_EQ(ReadAll(ino), data);
}

// --- background collection -------------------------------------------------

TEST_F(StripeClientTest, CollectorDeletesExactlyTheReplacedVersions) {
  const uint64_t ino = NewFile("f");
  std::vector<uint8_t> data;
  for (uint32_t round = 0; round < 5; ++round) {
    data = RandomBytes(2 * S(), 100 + round);
    ASSERT_TRUE(client().Write(ino, 0, data).ok());
  }
  client().DrainGarbage();
  EXPECT_EQ(StoredChunks(), 2u * 6u);  // only the newest version is left
  int deletes = 0;
  for (auto* f : faults_) deletes += f->version_deletes;
  EXPECT_EQ(deletes, 4 * 2 * 6);  // 4 replaced versions of 2 stripes
  EXPECT_EQ(client().counters().gc_errors, 0u);
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(StripeClientTest, ClosingTheClientDrainsQueuedCollection) {
  const uint64_t ino = NewFile("f");
  ASSERT_TRUE(client().Write(ino, 0, RandomBytes(3 * S(), 1)).ok());
  ASSERT_TRUE(client().Write(ino, 0, RandomBytes(3 * S(), 2)).ok());
  auto stripes = meta().GetStripes(ino, 0, 3);
  ASSERT_EQ(stripes->size(), 3u);
  vol_->CloseVolume();  // no DrainGarbage: the destructor drains
  EXPECT_EQ(StoredChunks(), 3u * 6u);
}

TEST_F(StripeClientTest, TruncatedStripesAreCollected) {
  const uint64_t ino = NewFile("f");
  ASSERT_TRUE(client().Write(ino, 0, RandomBytes(4 * S(), 1)).ok());
  ASSERT_TRUE(client().Truncate(ino, 4 * S(), S()).ok());
  client().DrainGarbage();
  EXPECT_EQ(StoredChunks(), 1u * 6u);
}

TEST(EmbeddedVolumeTest, CreatesReopensAndRejectsWrongDirs) {
  char tmpl[] = "/tmp/stripefs-vol-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    EmbeddedVolumeOptions o;
    o.geometry = Geometry{4, 2, 65536};
    auto v = Volume::OpenEmbedded(dir + "/vol", o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    auto f = (*v)->meta().MkNode(kRootInode, "x", 0100644, 0, 0, 0);
    ASSERT_TRUE(f.ok());
    auto data = RandomBytes(300000, 1);
    ASSERT_TRUE((*v)->client().Write(f->ino, 0, data).ok());
  }
  {
    auto v = Volume::OpenEmbedded(dir + "/vol");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ((*v)->geometry().cell_size, 65536u);
    auto a = (*v)->meta().Lookup(kRootInode, "x");
    ASSERT_TRUE(a.ok());
    std::vector<uint8_t> out(a->size);
    ASSERT_TRUE((*v)->client().Read(a->ino, 0, out, a->size).ok());
    EXPECT_EQ(out, RandomBytes(300000, 1));
  }
  std::ofstream(dir + "/junk/file").close();
  fs::create_directories(dir + "/junk");
  std::ofstream(dir + "/junk/file") << "x";
  auto bad = Volume::OpenEmbedded(dir + "/junk");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ENOTEMPTY);
  EmbeddedVolumeOptions no_create;
  no_create.create_if_missing = false;
  auto missing = Volume::OpenEmbedded(dir + "/none", no_create);
  EXPECT_EQ(missing.status().code(), ENOENT);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stripefs

namespace stripefs {
namespace {

// ---- stripe map cache (read path without metadata round trips) ----------

TEST_F(StripeClientTest, ReadOfACachedUnchangedStripeMakesNoMetadataCall) {
  const uint64_t ino = NewFile("cached");
  auto data = RandomBytes(3 * S() + 100, 11);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  const uint64_t size = data.size();
  std::vector<uint8_t> out(4096);
  ASSERT_TRUE(client().Read(ino, 0, out, size).ok());  // fills the map
  const int attrs = counting_->getattr_calls.load();
  const int maps = counting_->getstripes_calls.load();
  for (uint64_t off = 0; off + out.size() <= size; off += 3000) {
    auto n = client().Read(ino, off, out, size);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_EQ(*n, out.size());
    ASSERT_TRUE(std::equal(out.begin(), out.end(),
                           data.begin() + static_cast<long>(off)));
  }
  EXPECT_EQ(counting_->getstripes_calls.load(), maps);
  EXPECT_EQ(counting_->getattr_calls.load(), attrs);
  EXPECT_GT(client().counters().stripe_map_hits, 0u);
  // Its own overwrite names the new version in the map: the next read sees
  // it without a metadata call.
  auto patch = RandomBytes(S(), 12);
  ASSERT_TRUE(client().Write(ino, S(), patch).ok());
  const int after_write = counting_->getstripes_calls.load();
  EXPECT_EQ(after_write, maps);  // the write found its base in the map too
  std::copy(patch.begin(), patch.end(), data.begin() + static_cast<long>(S()));
  EXPECT_EQ(ReadAll(ino), data);
  EXPECT_EQ(counting_->getstripes_calls.load(), after_write);
  // So does its own truncate.
  auto t = client().Truncate(ino, size, S() + 10);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  data.resize(S() + 10);
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(StripeClientTest, AnotherClientsCommitIsSeenOnceTheMapIsForgotten) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("shared");
  auto data = RandomBytes(2 * S(), 21);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  // Client B: same metadata and chunk stores.
  std::vector<std::unique_ptr<ChunkService>> wrappers;
  for (size_t i = 0; i < vol_->servers(); ++i)
    wrappers.push_back(
        std::make_unique<FaultInjectingChunkService>(&vol_->store(i)));
  LocalChunkServers b_servers(std::move(wrappers));
  auto b = StripeClient::Create(&meta(), &b_servers);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto b_read = [&](uint64_t size) {
    std::vector<uint8_t> out(size);
    auto n = (*b)->Read(ino, 0, out, size);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return out;
  };
  const uint64_t big = 3 * S();  // B believes the file is this long
  std::vector<uint8_t> model = data;
  model.resize(big, 0);
  EXPECT_EQ(b_read(big), model);  // B caches stripes 0-1 and hole 2
  // A overwrites stripe 0 and its old version is collected: B's cached
  // version is gone, B re-reads that stripe's map and gets A's data.
  auto patch = RandomBytes(S(), 22);
  ASSERT_TRUE(client().Write(ino, 0, patch).ok());
  client().DrainGarbage();
  std::copy(patch.begin(), patch.end(), model.begin());
  EXPECT_EQ(b_read(big), model);
  // A fills the hole: B keeps reading its cached hole (the contract is
  // close-to-open) until it forgets the map, as OPEN does on a change.
  auto tail = RandomBytes(S(), 23);
  ASSERT_TRUE(client().Write(ino, 2 * S(), tail).ok());
  std::vector<uint8_t> stale = model;
  EXPECT_EQ(b_read(big), stale);
  (*b)->ForgetStripeMap(ino);
  std::copy(tail.begin(), tail.end(), model.begin() + 2 * S());
  EXPECT_EQ(b_read(big), model);
}

// A client of the fixture's metadata and stores with its own options and
// fault injectors (their `down` mirrors the fixture's SetDown).
struct SideClient {
  std::vector<FaultInjectingChunkService*> faults;
  std::unique_ptr<LocalChunkServers> servers;
  std::unique_ptr<StripeClient> client;
};
SideClient MakeSideClient(MetaService& meta, testing::InProcessVolume& vol,
                          const StripeClientOptions& options) {
  SideClient c;
  std::vector<std::unique_ptr<ChunkService>> wrappers;
  for (size_t i = 0; i < vol.servers(); ++i) {
    auto w = std::make_unique<FaultInjectingChunkService>(&vol.store(i));
    c.faults.push_back(w.get());
    wrappers.push_back(std::move(w));
  }
  c.servers = std::make_unique<LocalChunkServers>(std::move(wrappers));
  auto made = StripeClient::Create(&meta, c.servers.get(), options);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  if (made.ok()) c.client = std::move(made).value();
  return c;
}

// ---- the writer's base from the stripe map cache --------------------------

TEST_F(StripeClientTest,
       SequentialWritesAskMetadataForTheirBasesOncePerWindow) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("seqw");
  const int maps = counting_->getstripes_calls.load();
  std::vector<uint8_t> model;
  for (uint32_t i = 0; i < 8; ++i) {
    auto piece = RandomBytes(S(), 30 + i);
    ASSERT_TRUE(client().Write(ino, i * S(), piece).ok());
    model.insert(model.end(), piece.begin(), piece.end());
  }
  // One map window for eight new stripes.
  EXPECT_EQ(counting_->getstripes_calls.load(), maps + 1);
  // A partial overwrite (parity delta) finds its base, this client's own
  // commit, in the map too.
  auto patch = RandomBytes(100, 39);
  ASSERT_TRUE(client().Write(ino, S() + 10, patch).ok());
  std::copy(patch.begin(), patch.end(), model.begin() + S() + 10);
  EXPECT_EQ(counting_->getstripes_calls.load(), maps + 1);
  EXPECT_EQ(client().counters().parity_delta_updates, 1u);
  EXPECT_EQ(ReadAll(ino), model);
  // Distrusted (the file system saw the change marker move, here by this
  // client's own commits): writes keep their bases, a read reads the map
  // again.
  client().DistrustStripeMap(ino);
  patch = RandomBytes(100, 38);
  ASSERT_TRUE(client().Write(ino, 2 * S() + 10, patch).ok());
  std::copy(patch.begin(), patch.end(), model.begin() + 2 * S() + 10);
  EXPECT_EQ(counting_->getstripes_calls.load(), maps + 1);
  EXPECT_EQ(ReadAll(ino), model);
  EXPECT_EQ(counting_->getstripes_calls.load(), maps + 2);
}

TEST_F(StripeClientTest, AWriterWithAStaleCachedBaseStartsOverOnTheNewOne) {
  Open(6, Geometry{4, 2, 4096});
  SideClient b = MakeSideClient(meta(), *vol_, StripeClientOptions{});
  ASSERT_NE(b.client, nullptr);
  // A writes stripe 0 of a file (one stripe: its map window is cached,
  // with holes past it), then B changes stripe `s` behind A's back and its
  // collector deletes what it replaced; then A patches stripe `s` from its
  // stale map. It must lose (a failed base read or an ESTALE commit),
  // forget the map and start over on what B committed.
  const auto first = RandomBytes(S(), 40);
  // `model`: the file after B's change.
  auto stale_patch = [&](const std::string& name, uint64_t s,
                         const std::function<void(uint64_t)>& b_change,
                         std::vector<uint8_t> model) {
    const uint64_t ino = NewFile(name);
    ASSERT_TRUE(client().Write(ino, 0, first).ok());
    b_change(ino);
    b.client->DrainGarbage();
    const uint64_t conflicts = client().counters().commit_conflicts;
    auto patch = RandomBytes(100, 41);
    ASSERT_TRUE(client().Write(ino, s * S() + 100, patch).ok()) << name;
    EXPECT_EQ(client().counters().commit_conflicts, conflicts + 1) << name;
    model.resize(std::max<uint64_t>(model.size(), s * S() + 200), 0);
    std::copy(patch.begin(), patch.end(), model.begin() + s * S() + 100);
    EXPECT_EQ(ReadAll(ino), model) << name;
    b.client->ForgetStripeMap(ino);
    std::vector<uint8_t> seen(model.size());
    auto n = b.client->Read(ino, 0, seen, seen.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(seen, model) << name;
  };
  // The base moved on: B rewrote stripe 0.
  auto b0 = RandomBytes(S(), 42);
  stale_patch(
      "moved", 0,
      [&](uint64_t ino) { ASSERT_TRUE(b.client->Write(ino, 0, b0).ok()); }, b0);
  // The base is gone: B truncated stripe 0 away.
  stale_patch(
      "gone", 0,
      [&](uint64_t ino) { ASSERT_TRUE(b.client->Truncate(ino, S(), 0).ok()); },
      {});
  // The hole is not one any more: B wrote stripe 1.
  auto b1 = RandomBytes(S(), 43);
  std::vector<uint8_t> with_b1 = first;
  with_b1.insert(with_b1.end(), b1.begin(), b1.end());
  stale_patch(
      "filled", 1,
      [&](uint64_t ino) { ASSERT_TRUE(b.client->Write(ino, S(), b1).ok()); },
      with_b1);
}

// Reads [0, size) of `ino` in `piece`-byte READs, in order.
std::vector<uint8_t> ReadSequentially(StripeClient& c, uint64_t ino,
                                      uint64_t size, size_t piece) {
  std::vector<uint8_t> out(size);
  for (uint64_t off = 0; off < size; off += piece) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, size - off));
    auto got = c.Read(ino, off, std::span<uint8_t>(out.data() + off, n), size);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) break;
  }
  return out;
}

TEST_F(StripeClientTest, SequentialReadersGetStripesReadAheadWithinTheBudget) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("seq");
  auto data = RandomBytes(40 * S() + 123, 31);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  StripeClientOptions o;
  o.read_ahead_stripes = 8;
  o.read_cache_bytes = 4 * S();  // room for 4 of the 8 asked for
  SideClient side = MakeSideClient(meta(), *vol_, o);
  ASSERT_TRUE(side.client);
  EXPECT_EQ(ReadSequentially(*side.client, ino, data.size(), 4096), data);
  const auto c = side.client->counters();
  EXPECT_GT(c.read_ahead_loads, 0u);
  EXPECT_GT(c.stripe_cache_hits, 0u);
  EXPECT_LE(c.stripe_cache_bytes, o.read_cache_bytes);
  // Random READs start no read-ahead.
  SideClient random = MakeSideClient(meta(), *vol_, o);
  std::vector<uint8_t> out(4096);
  for (uint64_t off : {30 * S(), 2 * S(), 17 * S() + 5, S()})
    ASSERT_TRUE(random.client->Read(ino, off, out, data.size()).ok());
  EXPECT_EQ(random.client->counters().read_ahead_loads, 0u);
}

TEST_F(StripeClientTest, CollectorLingersSoSeveralCommitsShareOneDelete) {
  // A long linger (no test takes a minute): the old versions of two
  // separate writes wait together, and Drain() cuts the linger short.
  Open(6, Geometry{4, 2, 4096});
  StripeClientOptions o;
  o.gc_linger = std::chrono::seconds(60);
  SideClient side = MakeSideClient(meta(), *vol_, o);
  ASSERT_TRUE(side.client);
  const uint64_t ino = NewFile("linger");
  auto data = RandomBytes(S(), 51);
  ASSERT_TRUE(side.client->Write(ino, 0, data).ok());
  ASSERT_TRUE(side.client->Write(ino, 0, RandomBytes(S(), 52)).ok());
  ASSERT_TRUE(side.client->Write(ino, 0, data).ok());
  EXPECT_EQ(side.client->counters().gc_chunk_deletes, 0u);  // still lingering
  EXPECT_EQ(StoredChunks(), 3u * 6u);
  side.client->DrainGarbage();
  EXPECT_EQ(side.client->counters().gc_chunk_deletes, 2u * 6u);
  EXPECT_EQ(StoredChunks(), 6u);  // one version left
  EXPECT_EQ(ReadAll(ino), data);
}

TEST_F(StripeClientTest, DegradedStripeIsReconstructedOnceForAllReaders) {
  Open(6, Geometry{4, 2, 4096});
  const uint64_t ino = NewFile("degraded");
  const uint64_t stripes = 6;
  auto data = RandomBytes(stripes * S(), 41);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  const StripeClientOptions o = DegradedCacheOnly();
  SideClient side = MakeSideClient(meta(), *vol_, o);
  ASSERT_TRUE(side.client);
  // One server down: it holds a data chunk of some stripes (placement
  // spreads them), each of which needs a reconstruction.
  const uint32_t down = ServersOf(ino, 0)[0];
  uint64_t degraded = 0;
  for (uint64_t s = 0; s < stripes; ++s) {
    auto servers = ServersOf(ino, s);
    for (uint32_t i = 0; i < 4; ++i) degraded += servers[i] == down;
  }
  ASSERT_GT(degraded, 0u);
  side.faults[down]->down = true;
  SetDown(down, true);
  ASSERT_TRUE(side.client->RefreshClusterMap().ok());
  // Three readers, 4 KiB READs in and out of order: each degraded stripe is
  // reconstructed once.
  EXPECT_EQ(ReadSequentially(*side.client, ino, data.size(), 4096), data);
  EXPECT_EQ(ReadSequentially(*side.client, ino, data.size(), 1000), data);
  std::vector<uint8_t> out(4096);
  for (uint64_t off = data.size() - 4096;; off -= 4096) {
    auto n = side.client->Read(ino, off, out, data.size());
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_TRUE(std::equal(out.begin(), out.end(),
                           data.begin() + static_cast<long>(off)));
    if (off < 4096) break;
  }
  const auto c = side.client->counters();
  EXPECT_EQ(c.degraded_reads, degraded);
  EXPECT_EQ(c.degraded_stripe_loads, degraded);
  EXPECT_GT(c.stripe_cache_hits, 0u);
}

// With bounded reads (as over RPC) a degraded stripe's data columns are read
// in place and the lost ones rebuilt in place: no per-chunk vector read.
TEST_F(StripeClientTest, DegradedStripesLoadInPlaceWithOneOrTwoServersDown) {
  Open(6, Geometry{4, 2, 4096});
  const StripeClientOptions o = DegradedCacheOnly();
  const uint64_t stripes = 8;
  const uint64_t ino = NewFile("degraded-in-place");
  auto data = RandomBytes(stripes * S(), 43);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  for (size_t down_count : {size_t{1}, size_t{2}}) {
    SCOPED_TRACE(down_count);
    SideClient side = MakeSideClient(meta(), *vol_, o);
    ASSERT_TRUE(side.client);
    for (auto* f : side.faults) f->bounded = true;
    // The servers of stripe 0's first data chunks: each down one holds a
    // data chunk of stripe 0 at least.
    const auto first = ServersOf(ino, 0);
    std::vector<uint32_t> down(first.begin(),
                               first.begin() + static_cast<long>(down_count));
    uint64_t degraded = 0;
    for (uint64_t s = 0; s < stripes; ++s) {
      auto servers = ServersOf(ino, s);
      bool any = false;
      for (uint32_t i = 0; i < 4; ++i)
        any |= std::find(down.begin(), down.end(), servers[i]) != down.end();
      degraded += any;
    }
    for (uint32_t d : down) {
      side.faults[d]->down = true;
      SetDown(d, true);
    }
    ASSERT_TRUE(side.client->RefreshClusterMap().ok());
    EXPECT_EQ(ReadSequentially(*side.client, ino, data.size(), 4096), data);
    const auto c = side.client->counters();
    EXPECT_EQ(c.degraded_stripe_loads, degraded);
    EXPECT_EQ(c.degraded_reads, degraded);
    int vector_reads = 0, bounded_reads = 0;
    for (auto* f : side.faults) {
      vector_reads += f->reads.load();
      bounded_reads += f->bounded_reads.load();
    }
    EXPECT_EQ(vector_reads, 0);
    EXPECT_GT(bounded_reads, 0);
    for (uint32_t d : down) SetDown(d, false);
  }
}

TEST_F(StripeClientTest, OrphanPurgerRemovesGroupsWithPurgeInodes) {
  constexpr int kFiles = 20;
  std::vector<uint64_t> inos;
  ASSERT_NO_FATAL_FAILURE(MakeOrphans("o", kFiles, 1, &inos));
  client().DrainGarbage();
  ASSERT_GT(StoredChunks(), 0u);
  PurgeAll(inos);
  // Metadata went in PurgeInodes groups, never inode by inode.
  EXPECT_EQ(counting_->purge_inode_calls.load(), 0);
  EXPECT_EQ(counting_->purge_inodes_inodes.load(), kFiles);
  EXPECT_LE(counting_->purge_inodes_calls.load(), kFiles);
  for (uint64_t ino : inos)
    EXPECT_EQ(meta().GetAttr(ino).status().code(), ENOENT);
  EXPECT_TRUE(meta().ListOrphans()->empty());
  EXPECT_EQ(StoredChunks(), 0u);
}

// The purger's metadata calls do not grow with the group: one
// ListOrphanStripes (which also syncs) and one PurgeInodes per group, no
// GetAttr, GetStripes or Sync per inode; empty files need no chunk deletes.
TEST_F(StripeClientTest, OrphanPurgerMakesTwoMetadataCallsPerGroup) {
  constexpr int kFiles = 24;
  std::vector<uint64_t> inos;
  ASSERT_NO_FATAL_FAILURE(MakeOrphans("g", kFiles, 2, &inos));
  uint64_t kept = NewFile("kept");
  ASSERT_TRUE(client().Write(kept, 0, RandomBytes(S(), 99)).ok());
  client().DrainGarbage();
  const size_t kept_chunks = 6;  // one stripe of 4+2
  ASSERT_GT(StoredChunks(), kept_chunks);
  const int getattr = counting_->getattr_calls.load();
  const int getstripes = counting_->getstripes_calls.load();
  const int syncs = counting_->sync_calls.load();
  std::atomic<uint64_t> purged{0}, errors{0};
  {
    OrphanPurger purger({&meta(), &client(), &purged, &errors});
    for (uint64_t ino : inos) purger.Enqueue(ino);
    purger.Enqueue(kept);            // linked: left alone
    purger.Enqueue(inos[0]);         // twice: gone the second time
    purger.Enqueue(kept + 1000000);  // never existed
    purger.Drain();
  }
  EXPECT_EQ(purged.load(), static_cast<uint64_t>(kFiles));
  EXPECT_EQ(errors.load(), 0u);
  const int groups = counting_->purge_inodes_calls.load();
  EXPECT_GE(groups, 1);
  EXPECT_LE(groups, kFiles);
  // One listing per group, plus at most one for a group with no orphan
  // left in it (the duplicate, the linked and the missing inode may form
  // a group of their own: listed, nothing purged).
  EXPECT_GE(counting_->list_orphan_stripes_calls.load(), groups);
  EXPECT_LE(counting_->list_orphan_stripes_calls.load(), groups + 1);
  EXPECT_EQ(counting_->getattr_calls.load(), getattr);
  EXPECT_EQ(counting_->getstripes_calls.load(), getstripes);
  EXPECT_EQ(counting_->sync_calls.load(), syncs);
  EXPECT_EQ(counting_->purge_inode_calls.load(), 0);
  EXPECT_TRUE(meta().ListOrphans()->empty());
  EXPECT_EQ(StoredChunks(), kept_chunks);
  EXPECT_TRUE(meta().GetAttr(kept).ok());
}

// Against a metad without ListOrphanStripes (EOPNOTSUPP) the purger lists
// inode by inode and syncs once per group before any chunk goes.
TEST_F(StripeClientTest, OrphanPurgerFallsBackWithoutListOrphanStripes) {
  constexpr int kFiles = 6;
  std::vector<uint64_t> inos;
  ASSERT_NO_FATAL_FAILURE(MakeOrphans("h", kFiles, 1, &inos));
  client().DrainGarbage();
  counting_->list_orphan_stripes_unsupported = true;
  const int getattr = counting_->getattr_calls.load();
  const int syncs = counting_->sync_calls.load();
  PurgeAll(inos);
  EXPECT_EQ(counting_->list_orphan_stripes_calls.load(), 0);
  EXPECT_EQ(counting_->getattr_calls.load() - getattr, kFiles);
  EXPECT_EQ(counting_->sync_calls.load() - syncs,
            counting_->purge_inodes_calls.load());
  EXPECT_TRUE(meta().ListOrphans()->empty());
  EXPECT_EQ(StoredChunks(), 0u);
}

}  // namespace
}  // namespace stripefs
