// metad's health monitor and the stripe client's read deadline against a
// real local cluster (`stripefs cluster up`: metad + 7 chunkd on loopback,
// 4+2). A chunkd killed with SIGKILL or stopped with SIGSTOP must be marked
// down in the map (and up again when it returns) while I/O goes on; reads
// that need a stopped server complete by reconstruction. Every wait is a
// bounded poll on the outcome, never a wall-clock assertion.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/client/placement.h"
#include "backend/client/volume.h"
#include "tests/support/cluster_volume_test.h"
#include "tests/support/eventually.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

// Whether `cluster status` output has server `id`'s row in metad's map as
// down and unreachable ("3  ADDR  DOMAIN  down  NO (...)"), not merely the
// word "down" somewhere.
bool StatusShowsDown(const std::string& status, uint32_t id) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words),
                               std::istream_iterator<std::string>()};
    if (w.empty() || w[0] != std::to_string(id)) continue;
    const auto has = [&](const char* t) {
      return std::find(w.begin() + 1, w.end(), t) != w.end();
    };
    if (has("down") && has("NO")) return true;
  }
  return false;
}

using testing::RandomBytes;

class ClusterHealthTest : public testing::ClusterVolumeTest {
 protected:
  static constexpr int kServers = 7;

  void SetUp() override {
    testing::LocalClusterOptions co;
    co.servers = kServers;
    ASSERT_NO_FATAL_FAILURE(StartCluster(co));
    StripeClientOptions o;
    o.read_deadline = std::chrono::milliseconds(1000);
    ASSERT_NO_FATAL_FAILURE(Connect(o));
  }
  std::string Read(const std::string& file) { return cluster_->ReadFile(file); }
  // metad logs a change after it commits it, so the map can show the new
  // state a moment before the log line is written.
  bool MetadLogged(const std::string& line) {
    return testing::Eventually(
        [&] { return Read("metad.log").find(line) != std::string::npos; });
  }
};

TEST_F(ClusterHealthTest, KilledChunkdIsMarkedDownAndUpAgainWhileIoContinues) {
  const uint64_t S = client().stripe_size();
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(8 * S, 1);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  const uint64_t epoch0 = meta().GetClusterMap()->epoch;

  Signal(3, SIGKILL);
  const uint64_t down_epoch = WaitForState(3, ServerState::kDown);
  ASSERT_NE(down_epoch, 0u) << "metad never marked the killed chunkd down\n"
                            << Read("metad.log");
  EXPECT_GT(down_epoch, epoch0);
  EXPECT_TRUE(MetadLogged("chunkd 3 at")) << Read("metad.log");
  EXPECT_TRUE(MetadLogged("marked down")) << Read("metad.log");
  const size_t log_mark = cluster_->Log().size();
  EXPECT_NE(cluster_->Cli("cluster status --dir " + cluster_->dir()), 0);
  const std::string status = cluster_->Log().substr(log_mark);
  EXPECT_TRUE(StatusShowsDown(status, 3)) << status;
  ASSERT_TRUE(WaitForClientEpoch(down_epoch))
      << "the client never picked up the new map";

  // I/O goes on: writes over the file (degraded where server 3 holds a
  // chunk) and reads byte for byte.
  auto more = RandomBytes(8 * S, 2);
  ASSERT_TRUE(client().Write(ino, 0, more).ok());
  auto got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);

  Start(3);
  const uint64_t up_epoch = WaitForState(3, ServerState::kUp);
  ASSERT_NE(up_epoch, 0u) << Read("metad.log");
  EXPECT_GT(up_epoch, down_epoch);
  ASSERT_TRUE(WaitForClientEpoch(up_epoch));
  EXPECT_EQ(cluster_->Cli("cluster status --dir " + cluster_->dir()), 0)
      << cluster_->Log();
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);
}

TEST_F(ClusterHealthTest, StoppedChunkdIsReadAroundThenMarkedDownAndUp) {
  const uint64_t S = client().stripe_size();
  const uint64_t ino = NewFile("f");
  const int stripes = 8;
  auto data = RandomBytes(stripes * S, 3);
  ASSERT_TRUE(client().Write(ino, 0, data).ok());
  constexpr uint32_t kHung = 2;
  ASSERT_GT(StripesWithDataOn(ino, stripes, kHung), 0)
      << "pick another server: none of the file's data chunks is on it";

  // Hung, not dead: connections are accepted by the kernel, never answered.
  Signal(static_cast<int>(kHung), SIGSTOP);
  const auto before = client().counters();
  // The client's map still says `up`: reads reach the stopped server and
  // must be served by reconstruction once the read deadline passes.
  const auto t0 = std::chrono::steady_clock::now();
  auto got = ReadAll(ino);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  const auto after = client().counters();
  EXPECT_GT(after.slow_chunk_reads, before.slow_chunk_reads);
  EXPECT_GT(after.degraded_reads, before.degraded_reads);

  const uint64_t down_epoch = WaitForState(kHung, ServerState::kDown);
  ASSERT_NE(down_epoch, 0u) << "metad never marked the stopped chunkd down\n"
                            << Read("metad.log");
  ASSERT_TRUE(WaitForClientEpoch(down_epoch));
  // Now the client skips the server without a call: no more slow reads.
  const auto marked = client().counters();
  const auto t2 = std::chrono::steady_clock::now();
  got = ReadAll(ino);
  const auto t3 = std::chrono::steady_clock::now();
  // Informational only (never asserted): what the deadline costs.
  auto ms = [](auto d) {
    return static_cast<long long>(
        std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  std::printf(
      "read of %d stripes, %d with data on the stopped server: %lld ms "
      "before it was marked down (read deadline 1000 ms), %lld ms after\n",
      stripes, StripesWithDataOn(ino, stripes, kHung), ms(t1 - t0),
      ms(t3 - t2));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  EXPECT_EQ(client().counters().slow_chunk_reads, marked.slow_chunk_reads);
  // Writes go on (degraded) while it is stopped.
  auto more = RandomBytes(stripes * S, 4);
  ASSERT_TRUE(client().Write(ino, 0, more).ok());
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);

  Signal(static_cast<int>(kHung), SIGCONT);
  const uint64_t up_epoch = WaitForState(kHung, ServerState::kUp);
  ASSERT_NE(up_epoch, 0u) << Read("metad.log");
  EXPECT_GT(up_epoch, down_epoch);
  EXPECT_TRUE(MetadLogged("answers again")) << Read("metad.log");
  ASSERT_TRUE(WaitForClientEpoch(up_epoch));
  got = ReadAll(ino);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, more);
}

}  // namespace
}  // namespace stripefs
