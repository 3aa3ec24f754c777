// OrphanPurger: chunks first, metadata last. A child purging unlinked files
// is killed with SIGKILL at random points; after a restart's purge no chunk
// is left that no live stripe names, and every live file reads back.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <filesystem>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "backend/client/chunk_server_set.h"
#include "backend/client/orphan_purger.h"
#include "backend/client/volume.h"
#include "backend/meta/meta_store.h"
#include "tests/client/counting_meta_service.h"
#include "tests/client/orphan_purge_workload.h"
#include "tests/support/fault_injecting_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs {
namespace {

using testing::DeadName;
using testing::kDeadBytes;
using testing::kDeadPerRound;
using testing::kLiveBytes;
using testing::kPurgeGeometry;
using testing::LiveName;
using testing::LiveSeed;
using testing::RandomBytes;

class TempVolumeDir {
 public:
  TempVolumeDir() {
    char tmpl[] = "/tmp/stripefs-purge-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~TempVolumeDir() { std::filesystem::remove_all(dir_); }
  std::string vol() const { return dir_ + "/vol"; }

 private:
  std::string dir_;
};

Result<std::unique_ptr<Volume>> OpenVolume(const std::string& dir) {
  EmbeddedVolumeOptions o;
  o.geometry = kPurgeGeometry;
  o.chunk_reserve_bytes = 0;
  return Volume::OpenEmbedded(dir, o);
}

// Purges every orphan as a mount does; returns the purged count.
uint64_t PurgeOrphans(Volume& v) {
  std::atomic<uint64_t> purged{0}, errors{0};
  {
    OrphanPurger purger({&v.meta(), &v.client(), &purged, &errors});
    auto orphans = v.meta().ListOrphans();
    EXPECT_TRUE(orphans.ok()) << orphans.status().ToString();
    if (orphans.ok())
      for (uint64_t ino : *orphans) purger.Enqueue(ino);
    purger.Drain();
  }
  EXPECT_EQ(errors.load(), 0u);
  return purged.load();
}

// (inode, stripe, version) of every chunk in the volume's stores.
std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> StoredChunks(Volume& v) {
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> out;
  auto* local = dynamic_cast<LocalChunkServers*>(&v.servers());
  EXPECT_NE(local, nullptr);
  if (!local) return out;
  for (size_t i = 0; i < local->size(); ++i) {
    ChunkInfo after;
    for (int page = 0; page < 1000; ++page) {
      auto list = local->at(i)->ListChunks(after, 512);
      EXPECT_TRUE(list.ok()) << list.status().ToString();
      if (!list.ok() || list->empty()) break;
      for (const ChunkInfo& c : *list)
        out.emplace_back(c.id.inode, c.id.stripe, c.version);
      after = list->back();
    }
  }
  return out;
}

// Every stored chunk belongs to a committed stripe version of a live inode.
void ExpectNoLeak(Volume& v) {
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> live;
  StripeRef after;
  for (int page = 0; page < 1000; ++page) {
    auto refs = v.meta().ListStripes(after.inode, after.sv.stripe, 512);
    ASSERT_TRUE(refs.ok()) << refs.status().ToString();
    if (refs->empty()) break;
    for (const StripeRef& r : *refs)
      live.emplace(r.inode, r.sv.stripe, r.sv.version);
    after = refs->back();
  }
  size_t leaked = 0;
  for (const auto& c : StoredChunks(v)) leaked += live.count(c) == 0;
  EXPECT_EQ(leaked, 0u) << "chunks no committed stripe names";
}

pid_t SpawnChild(const std::string& dir, int round, bool stop_mid, int* fd) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    const std::string r = std::to_string(round), w = std::to_string(p[1]);
    ::execl(ORPHAN_PURGE_CHILD, ORPHAN_PURGE_CHILD, dir.c_str(), r.c_str(),
            w.c_str(), stop_mid ? "mid" : static_cast<char*>(nullptr),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(p[1]);
  *fd = p[0];
  return pid;
}

// Reads one byte from `fd` within 30 s; 0 on EOF or timeout.
char ReadMark(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  char c = 0;
  if (::poll(&pfd, 1, 30000) <= 0 || ::read(fd, &c, 1) != 1) return 0;
  return c;
}

TEST(OrphanPurgeCrashTest, KillDuringPurgeLeaksNothingAfterRestart) {
  TempVolumeDir tmp;
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int kRounds = 6;
  int finished = 0;
  bool last_finished = false;
  for (int round = 0; round < kRounds; ++round) {
    // Odd rounds, the last among them, are killed at a fixed point: after
    // the chunk deletes, before the metadata purge (the window a random
    // kill may miss). Even rounds are killed at a random moment.
    const bool stop_mid = round % 2 == 1;
    int fd = -1;
    const pid_t pid = SpawnChild(tmp.vol(), round, stop_mid, &fd);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(ReadMark(fd), 'P') << "child failed before its purge";
    if (stop_mid) {
      ASSERT_EQ(ReadMark(fd), 'M') << "child never reached the hook";
    } else {
      // Anywhere in the chunk deletes, the metadata purges, or after them.
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150000));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pollfd pfd{fd, POLLIN, 0};
    char c = 0;
    last_finished =
        ::poll(&pfd, 1, 0) > 0 && ::read(fd, &c, 1) == 1 && c == 'D';
    finished += last_finished;
    ::close(fd);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited on its own";
  }
  std::printf("%d of %d purges finished before the kill\n", finished, kRounds);
  ASSERT_FALSE(last_finished) << "the last round must die inside its purge";
  auto v = OpenVolume(tmp.vol());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // The last child died with its orphans' chunks deleted and their metadata
  // kept: they are still listed, and none of their chunks is stored.
  auto pending = (*v)->meta().ListOrphans();
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_GE(pending->size(), static_cast<size_t>(kDeadPerRound));
  const std::set<uint64_t> pending_set(pending->begin(), pending->end());
  size_t pending_chunks = 0;
  for (const auto& c : StoredChunks(**v))
    pending_chunks += pending_set.count(std::get<0>(c));
  EXPECT_EQ(pending_chunks, 0u) << "the killed purge had deleted them";
  const size_t chunks_before = StoredChunks(**v).size();
  const uint64_t resumed = PurgeOrphans(**v);
  const size_t chunks_after = StoredChunks(**v).size();
  std::printf("restart purged %" PRIu64 " orphans: %zu -> %zu chunks\n",
              resumed, chunks_before, chunks_after);
  EXPECT_EQ(resumed, pending->size()) << "the restart resumes every orphan";
  EXPECT_EQ(chunks_after, kRounds * 4u * 6u);  // 4 stripes per live file
  auto orphans = (*v)->meta().ListOrphans();
  ASSERT_TRUE(orphans.ok());
  EXPECT_TRUE(orphans->empty());
  ExpectNoLeak(**v);
  for (int round = 0; round < kRounds; ++round) {
    auto a = (*v)->meta().Lookup(kRootInode, LiveName(round));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    std::vector<uint8_t> out(a->size);
    auto n = (*v)->client().Read(a->ino, 0, out, a->size);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(out, RandomBytes(kLiveBytes, LiveSeed(round)));
    for (int i = 0; i < kDeadPerRound; ++i)
      EXPECT_FALSE((*v)->meta().Lookup(kRootInode, DeadName(round, i)).ok());
  }
}

TEST(OrphanPurgeTest, LinkedInodesAreLeftAlone) {
  TempVolumeDir tmp;
  auto v = OpenVolume(tmp.vol());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  auto f = (*v)->meta().MkNode(kRootInode, "kept", 0100644, 0, 0, 0);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*v)->client().Write(f->ino, 0, RandomBytes(kLiveBytes, 3)).ok());
  const size_t chunks = StoredChunks(**v).size();
  std::atomic<uint64_t> purged{0}, errors{0};
  {
    OrphanPurger purger({&(*v)->meta(), &(*v)->client(), &purged, &errors});
    purger.Enqueue(f->ino);         // not an orphan: must be skipped
    purger.Enqueue(f->ino + 1000);  // no such inode
  }
  EXPECT_EQ(purged.load(), 0u);
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(StoredChunks(**v).size(), chunks);
  EXPECT_TRUE((*v)->meta().GetAttr(f->ino).ok());
}

// The crash rule behind the kill test: the unlinks that made the orphans
// are durable before the first chunk delete (a SIGKILL cannot show it: the
// WAL is in the page cache; a power loss would). The store acknowledges
// namespace changes before its WAL sync, with an hour's delay so that its
// background sync never runs here: the only syncs between the unlinks and
// the deletes are the purger's. With ListOrphanStripes, and with a metad
// without it (GetAttr, GetStripes, Sync).
TEST(OrphanPurgeTest, UnlinksAreDurableBeforeTheFirstChunkDelete) {
  for (bool batched : {true, false}) {
    SCOPED_TRACE(batched ? "ListOrphanStripes" : "per-inode reads and Sync");
    testing::InProcessVolumeOptions o;
    o.geometry = kPurgeGeometry;
    o.meta.sync = true;
    o.meta.namespace_sync_delay = std::chrono::hours(1);
    MetaStore* store = nullptr;
    testing::CountingMetaService* counting = nullptr;
    o.wrap_meta = [&](std::unique_ptr<MetaService> inner) {
      store = dynamic_cast<MetaStore*>(inner.get());
      counting = nullptr;
      return std::unique_ptr<MetaService>(
          testing::CountingWrapper(&counting)(std::move(inner)));
    };
    auto v = testing::InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    ASSERT_NE(store, nullptr);
    ASSERT_NE(counting, nullptr);
    counting->list_orphan_stripes_unsupported = !batched;
    MetaService& meta = (*v)->volume().meta();
    StripeClient& client = (*v)->volume().client();
    std::vector<uint64_t> inos;
    for (int i = 0; i < 4; ++i) {
      const std::string name = "u" + std::to_string(i);
      auto f = meta.MkNode(kRootInode, name, 0100644, 0, 0, 0);
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE(
          client.Write(f->ino, 0, RandomBytes(kDeadBytes, 7u + i)).ok());
      ASSERT_TRUE(meta.Unlink(kRootInode, name).ok());
      inos.push_back(f->ino);
    }
    client.DrainGarbage();
    ASSERT_GT((*v)->StoredChunks(), 0u);
    const uint64_t syncs = store->commit_stats().wal_syncs;
    std::atomic<bool> deleted{false};
    std::atomic<uint64_t> syncs_at_first_delete{0};
    for (size_t i = 0; i < (*v)->servers(); ++i) {
      (*v)->service<testing::FaultInjectingChunkService>(i)->before_delete =
          [&] {
            bool first = false;
            if (deleted.compare_exchange_strong(first, true))
              syncs_at_first_delete = store->commit_stats().wal_syncs;
          };
    }
    std::atomic<uint64_t> purged{0}, errors{0};
    {
      OrphanPurger purger({&meta, &client, &purged, &errors});
      for (uint64_t ino : inos) purger.Enqueue(ino);
      purger.Drain();
    }
    EXPECT_EQ(purged.load(), inos.size());
    EXPECT_EQ(errors.load(), 0u);
    ASSERT_TRUE(deleted.load());
    EXPECT_GT(syncs_at_first_delete.load(), syncs)
        << "a chunk was deleted before the unlinks were durable";
    EXPECT_EQ((*v)->StoredChunks(), 0u);
    EXPECT_EQ(counting->list_orphan_stripes_calls.load() > 0, batched);
  }
}

}  // namespace
}  // namespace stripefs
