// The chunk store across power cuts: chunk_crash_child (the writer of
// ChunkStoreCrashTest) writes and deletes chunks in a store on LossyFs and
// reports each acknowledged operation; the test kill -9s it at a random
// moment, cuts the power (dropping every unsynced write and directory
// change, tearing the last write at a sector boundary), reopens the store
// and checks that every acknowledged write reads back exactly, every
// acknowledged delete stays gone, and the operation in flight is all or
// nothing. The seed is printed; LOSSYFS_SEED=<n> replays the run.
//
// The store's own directory is made and synced before the first round, as
// an operator provisions a data directory; everything below it is the
// store's to make durable.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>

#include "backend/chunk/chunk_store.h"
#include "common/coding.h"
#include "tests/chunk/chunk_crash_workload.h"
#include "tests/chunk/chunk_payload.h"
#include "tests/fuse/mounted_session.h"
#include "tests/lossyfs/lossy_fs.h"

namespace stripefs::lossyfs {
namespace {

using crash::IdOf;
using crash::SizeOf;
using fuse::testing::MountedSession;
using stripefs::testing::Payload;

struct Ack {
  uint8_t op;  // 'W' written, 'D' deleted
  uint64_t n;
};

bool ReadAck(int fd, Ack* a) {
  uint8_t rec[9];
  size_t got = 0;
  while (got < sizeof(rec)) {
    ssize_t n = ::read(fd, rec + got, sizeof(rec) - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  a->op = rec[0];
  a->n = coding::LoadLe<uint64_t>(rec + 1);
  return true;
}

pid_t Spawn(const std::string& dir, uint64_t first, int* ack_fd) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string f = std::to_string(first), fd = std::to_string(p[1]);
    ::execl(CHUNK_CRASH_CHILD, CHUNK_CRASH_CHILD, dir.c_str(), f.c_str(),
            fd.c_str(), "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(p[1]);
  *ack_fd = p[0];
  return pid;
}

TEST(ChunkStorePowerCutTest, AcknowledgedChunksSurviveEachCut) {
  std::string why = fuse::testing::MountSkipReason();
  if (!why.empty()) GTEST_SKIP() << "lossyfs needs a real mount: " << why;
  const char* env = std::getenv("LOSSYFS_SEED");
  const uint64_t seed =
      env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("chunk store power cuts: seed %llu (replay: LOSSYFS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  LossyFs fs(seed);
  fuse::MountOptions mo;
  mo.fsname = mo.subtype = "lossyfs";
  auto m = MountedSession::Start(&fs, LossyFs::SessionOptionsForLossyFs(), mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::unique_ptr<MountedSession> mount = std::move(*m);
  const std::string dir = mount->Path("store");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  fs.Sync();  // the provisioned data directory

  std::map<uint64_t, bool> acked;  // n -> still present (false: deleted)
  uint64_t next = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int ack_fd = -1;
    pid_t pid = Spawn(dir, next, &ack_fd);
    ASSERT_GT(pid, 0);
    const size_t want = 3 + rng() % 20;
    uint64_t last_written = next;
    auto take = [&](const Ack& a) {
      acked[a.n] = a.op == 'W';
      if (a.op == 'W') last_written = a.n;
    };
    bool child_failed = false;
    for (size_t got = 0; got < want; ++got) {
      pollfd pfd{ack_fd, POLLIN, 0};
      ASSERT_GT(::poll(&pfd, 1, 20000), 0)
          << "writer child made no progress for 20 s";
      Ack a;
      if (!ReadAck(ack_fd, &a)) {
        child_failed = true;
        break;
      }
      take(a);
    }
    ::usleep(static_cast<useconds_t>(rng() % 4000));  // land mid-write
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_FALSE(child_failed)
        << "writer child exited early, status " << status;
    Ack a;
    while (ReadAck(ack_fd, &a)) take(a);
    ::close(ack_fd);
    const uint64_t in_flight = last_written + 1;
    // The child deletes n-2 right after writing n when n % 3 == 0.
    std::optional<uint64_t> delete_in_flight;
    if (last_written % 3 == 0 && last_written >= 2 &&
        acked.count(last_written - 2) && acked[last_written - 2]) {
      delete_in_flight = last_written - 2;
    }

    CutReport cut = fs.PowerCut(true);
    std::printf(
        "round %d: %zu acks, cut: %llu inodes vanished, torn %d "
        "(kept %llu of %llu bytes)\n",
        round, acked.size(),
        static_cast<unsigned long long>(cut.vanished_inodes), cut.torn ? 1 : 0,
        static_cast<unsigned long long>(cut.kept),
        static_cast<unsigned long long>(cut.length));

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    if (delete_in_flight) {
      auto r = store->ReadChunk(IdOf(*delete_in_flight), 1, 0, 0);
      if (r.status().code() == ENOENT) {
        acked[*delete_in_flight] = false;
      } else {
        ASSERT_TRUE(r.ok()) << r.status().ToString();
      }
    }
    size_t present = 0;
    for (const auto& [n, alive] : acked) {
      auto r =
          store->ReadChunk(IdOf(n), 1, 0, static_cast<uint32_t>(SizeOf(n)));
      if (alive) {
        ASSERT_TRUE(r.ok())
            << "acknowledged chunk " << n << ": " << r.status().ToString();
        ASSERT_EQ(*r, Payload(SizeOf(n), n)) << n;
        ++present;
      } else {
        EXPECT_EQ(r.status().code(), ENOENT)
            << "acknowledged delete of chunk " << n << " came back";
      }
    }
    auto r = store->ReadChunk(IdOf(in_flight), 1, 0,
                              static_cast<uint32_t>(SizeOf(in_flight)));
    if (r.ok()) {
      EXPECT_EQ(*r, Payload(SizeOf(in_flight), in_flight));
      acked[in_flight] = true;
      ++present;
    } else {
      EXPECT_EQ(r.status().code(), ENOENT) << r.status().ToString();
    }
    EXPECT_EQ(store->Stats()->chunks, present);
    next = in_flight + 1;
  }
  EXPECT_GE(acked.size(), 18u);
  EXPECT_EQ(fs.cuts(), 6u);
}

}  // namespace
}  // namespace stripefs::lossyfs
