// The chunk store across power cuts: chunk_crash_child (the writer of
// ChunkStoreCrashTest) writes and deletes chunks (and, in the patch
// workload, patches and clones them) in a store on LossyFs and
// reports each acknowledged operation; the test kill -9s it at a random
// moment, cuts the power (dropping every unsynced write and directory
// change, tearing the last write at a sector boundary), reopens the store
// and checks that every acknowledged write reads back exactly, every
// acknowledged delete stays gone, and the operation in flight is all or
// nothing. The seed is printed; LOSSYFS_SEED=<n> replays the run.
//
// The store makes its own directory (ChunkStore::Open, create_if_missing):
// that it survives the first cut is part of what is checked.
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

pid_t Spawn(const std::string& dir, uint64_t first, int threads, int* ack_fd) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string f = std::to_string(first), fd = std::to_string(p[1]),
                t = std::to_string(threads);
    ::execl(CHUNK_CRASH_CHILD, CHUNK_CRASH_CHILD, dir.c_str(), f.c_str(),
            fd.c_str(), t.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(p[1]);
  *ack_fd = p[0];
  return pid;
}

// A LossyFs mounted (the store's directory not made yet); the seed from
// LOSSYFS_SEED or a fresh one, printed.
class ChunkStorePowerCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = fuse::testing::MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "lossyfs needs a real mount: " << why;
    const char* env = std::getenv("LOSSYFS_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf(
        "chunk store power cuts: seed %llu (replay: LOSSYFS_SEED=%llu)\n",
        static_cast<unsigned long long>(seed_),
        static_cast<unsigned long long>(seed_));
    fs_ = std::make_unique<LossyFs>(seed_);
    fuse::MountOptions mo;
    mo.fsname = mo.subtype = "lossyfs";
    auto m = MountedSession::Start(fs_.get(),
                                   LossyFs::SessionOptionsForLossyFs(), mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    mount_ = std::move(*m);
    // The writer's ChunkStore::Open makes the store's directory itself.
    dir_ = mount_->Path("store");
  }
  void TearDown() override {
    mount_.reset();  // unmounts before the file system goes
    fs_.reset();
  }
  // Kills the writer, reaps it, takes the acknowledgements still in the
  // pipe, then cuts the power (tearing the last unsynced write).
  template <typename Take>
  void KillAndCut(pid_t pid, int ack_fd, int round, Take take) {
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exit status " << status;
    Ack a;
    while (ReadAck(ack_fd, &a)) take(a);
    ::close(ack_fd);
    CutReport cut = fs_->PowerCut(true);
    std::printf(
        "round %d: cut: %llu inodes vanished, torn %d (kept %llu of "
        "%llu bytes)\n",
        round, static_cast<unsigned long long>(cut.vanished_inodes),
        cut.torn ? 1 : 0, static_cast<unsigned long long>(cut.kept),
        static_cast<unsigned long long>(cut.length));
  }
  void PatchRounds(int threads, uint64_t batch);
  // The one-writer workload (writes, deletes); `mode` -2 adds a thread
  // compacting in a loop (chunk_crash_child). Returns the chunks the
  // compactions reported moved.
  uint64_t WriteDeleteRounds(int mode);
  // Every segment left holds live entries, together exactly `present`.
  void ExpectSegmentsMatch(ChunkStore* store, size_t present);

  uint64_t seed_ = 0;
  std::unique_ptr<LossyFs> fs_;
  std::unique_ptr<MountedSession> mount_;
  std::string dir_;
};

void ChunkStorePowerCutTest::ExpectSegmentsMatch(ChunkStore* store,
                                                 size_t present) {
  size_t live = 0;
  for (const auto& seg : store->Segments()) {
    EXPECT_GT(seg.usage.live_entries, 0u) << "segment " << seg.seq;
    EXPECT_LE(seg.usage.live_bytes, seg.usage.end) << "segment " << seg.seq;
    live += seg.usage.live_entries;
  }
  EXPECT_EQ(live, present);
}

uint64_t ChunkStorePowerCutTest::WriteDeleteRounds(int mode) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  std::mt19937_64 rng(seed_);
  const std::string& dir = dir_;
  uint64_t moved = 0;

  std::map<uint64_t, bool> acked;  // n -> still present (false: deleted)
  uint64_t next = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int ack_fd = -1;
    pid_t pid = Spawn(dir, next, mode, &ack_fd);
    EXPECT_GT(pid, 0);
    if (pid <= 0) return moved;
    // With the compactor, more records per round: the compactions need
    // deletes to have left dead bytes in sealed segments.
    const size_t want = mode == -2 ? 20 + rng() % 60 : 3 + rng() % 20;
    uint64_t last_written = next;
    auto take = [&](const Ack& a) {
      if (a.op == 'K') {
        moved += a.n;
        return;
      }
      acked[a.n] = a.op == 'W';
      if (a.op == 'W') last_written = a.n;
    };
    bool child_failed = false;
    for (size_t got = 0; got < want; ++got) {
      pollfd pfd{ack_fd, POLLIN, 0};
      if (::poll(&pfd, 1, 20000) <= 0) {
        ADD_FAILURE() << "writer child made no progress for 20 s";
        child_failed = true;
        break;
      }
      Ack a;
      if (!ReadAck(ack_fd, &a)) {
        ADD_FAILURE() << "writer child exited early";
        child_failed = true;
        break;
      }
      take(a);
    }
    ::usleep(static_cast<useconds_t>(rng() % 4000));  // land mid-write
    KillAndCut(pid, ack_fd, round, take);
    if (child_failed || HasFatalFailure()) return moved;
    const uint64_t in_flight = last_written + 1;
    // The child deletes n-2 right after writing n when n % 3 == 0.
    std::optional<uint64_t> delete_in_flight;
    if (last_written % 3 == 0 && last_written >= 2 &&
        acked.count(last_written - 2) && acked[last_written - 2]) {
      delete_in_flight = last_written - 2;
    }

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    o.compact_bytes_per_sec = 0;  // nothing moves while this checks
    auto s = ChunkStore::Open(dir, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return moved;
    auto& store = *s;
    if (delete_in_flight) {
      auto r = store->ReadChunk(IdOf(*delete_in_flight), 1, 0, 0);
      if (r.status().code() == ENOENT) {
        acked[*delete_in_flight] = false;
      } else {
        EXPECT_TRUE(r.ok()) << r.status().ToString();
      }
    }
    size_t present = 0;
    for (const auto& [n, alive] : acked) {
      auto r =
          store->ReadChunk(IdOf(n), 1, 0, static_cast<uint32_t>(SizeOf(n)));
      if (alive) {
        EXPECT_TRUE(r.ok())
            << "acknowledged chunk " << n << ": " << r.status().ToString();
        if (!r.ok()) return moved;
        EXPECT_EQ(*r, Payload(SizeOf(n), n)) << n;
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
    ExpectSegmentsMatch(store.get(), present);
    next = in_flight + 1;
  }
  EXPECT_GE(acked.size(), 18u);
  EXPECT_EQ(fs_->cuts(), 6u);
  return moved;
}

TEST_F(ChunkStorePowerCutTest, AcknowledgedChunksSurviveEachCut) {
  WriteDeleteRounds(1);
}

// Cuts while segments are being compacted: a move whose copy or whose
// index write the cut lost is undone (the chunk stays where it was),
// an acknowledged one reads back from its new place, and a compacted
// segment whose removal the cut undid is removed at open.
TEST_F(ChunkStorePowerCutTest, AcknowledgedChunksSurviveCutsDuringCompaction) {
  const uint64_t moved = WriteDeleteRounds(-2);
  std::printf("compactions moved %llu chunks across the rounds\n",
              static_cast<unsigned long long>(moved));
  EXPECT_GT(moved, 0u) << "no compaction ran: the cuts never met one";
}

// The patch workload (chunk_crash_child THREADS 0, or -1 for ApplyChunkOps
// batches of `batch`): per n, write version 1, patch it to 2, clone 2 to 3,
// patch 3 to 4 (two ranges when they fit), delete 1. After each cut every
// acknowledged version reads back exactly, every acknowledged delete stays
// gone, anything else is exact or absent.
void ChunkStorePowerCutTest::PatchRounds(int threads, uint64_t batch) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  std::mt19937_64 rng(seed_);
  // (n, version) -> acknowledged present (false: acknowledged deleted).
  std::map<std::pair<uint64_t, uint64_t>, bool> acked;
  uint64_t next = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int ack_fd = -1;
    pid_t pid = Spawn(dir_, next, threads, &ack_fd);
    ASSERT_GT(pid, 0);
    const size_t want = 3 + rng() % 30;
    uint64_t top = next;
    uint8_t last_op = 0;  // of the last record (its n is top)
    auto take = [&](const Ack& a) {
      top = std::max(top, a.n);
      last_op = a.op;
      if (a.op == 'W') acked[{a.n, 1}] = true;
      if (a.op >= '2' && a.op <= '4') acked[{a.n, uint64_t(a.op - '0')}] = true;
      if (a.op == 'D') acked[{a.n, 1}] = false;
    };
    for (size_t got = 0; got < want; ++got) {
      pollfd pfd{ack_fd, POLLIN, 0};
      ASSERT_GT(::poll(&pfd, 1, 20000), 0)
          << "writer child made no progress for 20 s";
      Ack a;
      ASSERT_TRUE(ReadAck(ack_fd, &a)) << "writer child exited early";
      take(a);
    }
    ::usleep(static_cast<useconds_t>(rng() % 4000));
    KillAndCut(pid, ack_fd, round, take);
    if (HasFatalFailure()) return;

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    size_t present = 0;
    for (uint64_t n = 0; n <= top + batch; ++n) {
      const auto len = static_cast<uint32_t>(crash::PatchSizeOf(n));
      for (uint64_t v = 1; v <= 4; ++v) {
        auto r = store->ReadChunk(crash::PatchIdOf(n), v, 0, len);
        auto it = acked.find({n, v});
        // The delete of version 1 of the last n (of the last batch) may be
        // in flight, or done with its 'D' records cut short by the kill.
        const bool maybe_deleted =
            n + batch > top && v == 1 && (last_op == '4' || last_op == 'D');
        if (it != acked.end() && it->second && !maybe_deleted) {
          ASSERT_TRUE(r.ok()) << "acknowledged n " << n << " v " << v << ": "
                              << r.status().ToString();
        }
        if (it != acked.end() && !it->second) {
          ASSERT_EQ(r.status().code(), ENOENT)
              << "acknowledged delete of n " << n << " came back";
        }
        if (r.ok()) {
          ASSERT_EQ(*r, crash::PatchedContent(n, v)) << "n " << n << " v " << v;
          acked[{n, v}] = true;  // in flight and made it
          ++present;
        } else {
          ASSERT_EQ(r.status().code(), ENOENT) << r.status().ToString();
          if (it != acked.end()) acked[{n, v}] = false;
        }
      }
    }
    EXPECT_EQ(store->Stats()->chunks, present);
    next = top + batch + 1;  // past what was in flight
  }
  EXPECT_GE(acked.size(), 20u);
  EXPECT_EQ(fs_->cuts(), 6u);
}

TEST_F(ChunkStorePowerCutTest, AcknowledgedPatchesAndClonesSurviveEachCut) {
  PatchRounds(0, 1);
}

TEST_F(ChunkStorePowerCutTest, AcknowledgedBatchedPatchesSurviveEachCut) {
  PatchRounds(-1, crash::kPatchBatch);
}

}  // namespace
}  // namespace stripefs::lossyfs
