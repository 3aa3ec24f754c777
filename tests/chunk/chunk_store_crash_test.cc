// Crash consistency: a child process (chunk_crash_child) writes and deletes
// chunks and reports each acknowledged operation through a pipe; the parent
// kill -9s it at a random moment, reopens the store and checks that every
// acknowledged write reads back intact, every acknowledged delete is gone, the
// operation in flight is all-or-nothing, and no temp or orphan files remain.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <optional>
#include <random>

#include "backend/chunk/chunk_index_codec.h"
#include "backend/chunk/chunk_paths.h"
#include "backend/chunk/chunk_store.h"
#include "common/coding.h"
#include "common/unique_fd.h"
#include "tests/chunk/chunk_crash_workload.h"
#include "tests/chunk/chunk_store_test_util.h"

namespace stripefs {
namespace {

using testing::CountFiles;
using testing::Payload;
using testing::TempDir;

struct Ack {
  uint8_t op;  // 'W' written, 'D' deleted
  uint64_t n;
};

using crash::IdOf;
using crash::SizeOf;

// Reads one 9-byte record; false at end of stream.
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

// After a reopen: every segment left holds live entries, together exactly
// the chunks present, and no other segment file is in segments/ (spares
// may be).
void ExpectNoGarbage(ChunkStore* store, const std::string& dir,
                     size_t present) {
  size_t live = 0;
  for (const auto& seg : store->Segments()) {
    EXPECT_GT(seg.usage.live_entries, 0u) << "segment " << seg.seq;
    EXPECT_LE(seg.usage.live_bytes, seg.usage.end) << "segment " << seg.seq;
    live += seg.usage.live_entries;
  }
  EXPECT_EQ(live, present);
  EXPECT_EQ(CountFiles(dir + "/segments", ".seg"), store->Segments().size());
  EXPECT_EQ(CountFiles(dir + "/tmp"), 0u);
}

// The pending records in the index of the store in `dir` (read-only open:
// works while the store is open, the records being synced; a few tries, as
// the store may just be deleting the files of a flushed memtable).
size_t PendingRecordsOnDisk(const std::string& dir) {
  rocksdb::DB* raw = nullptr;
  rocksdb::Options o;
  rocksdb::Status st;
  for (int attempt = 0; attempt < 20; ++attempt) {
    st = rocksdb::DB::OpenForReadOnly(o, dir + "/index", &raw);
    if (st.ok()) break;
    ::usleep(50000);
  }
  if (!st.ok()) {
    ADD_FAILURE() << "cannot open index of " << dir << ": " << st.ToString();
    return ~size_t{0};
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator({}));
  size_t n = 0;
  for (it->Seek(std::string(1, kPendingKeyPrefix));
       it->Valid() && it->key()[0] == kPendingKeyPrefix; it->Next()) {
    ++n;
  }
  return n;
}

// Starts chunk_crash_child writing from `first` with `threads` writers;
// returns its pid and the read end of its ack pipe.
pid_t Spawn(const std::string& dir, uint64_t first, int threads, int* ack_fd) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    // exec a fresh process: this one may have RocksDB threads whose locks
    // a forked child would inherit in an unknown state.
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

TEST(ChunkStoreCrashTest, KillNineNeverExposesHalfWrittenChunks) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  // A fresh seed each run covers more kill points; it is printed so a
  // failure can be replayed.
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::map<uint64_t, bool> acked;  // n -> still present (false: deleted)
  uint64_t next = 0;
  for (int round = 0; round < 10; ++round) {
    int p[2];
    pid_t pid = Spawn(dir, next, 1, &p[0]);
    ASSERT_GT(pid, 0);
    const size_t want = 3 + rng() % 25;
    size_t got = 0;
    uint64_t last_written = next;
    bool child_failed = false;
    auto take = [&](const Ack& a) {
      if (a.op == 'W') {
        acked[a.n] = true;
        last_written = a.n;
      } else {
        acked[a.n] = false;
      }
    };
    while (got < want) {
      pollfd pfd{p[0], POLLIN, 0};
      int r = ::poll(&pfd, 1, 20000);
      ASSERT_GT(r, 0) << "writer child made no progress for 20 s";
      Ack a;
      if (!ReadAck(p[0], &a)) {
        child_failed = true;
        break;
      }
      take(a);
      ++got;
    }
    ASSERT_FALSE(child_failed) << "writer child exited early";
    ::usleep(static_cast<useconds_t>(rng() % 4000));  // land mid-write
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exit status " << status;
    // Everything the child reported before dying was acknowledged.
    Ack a;
    while (ReadAck(p[0], &a)) take(a);
    ::close(p[0]);
    const uint64_t in_flight = last_written + 1;
    // The child deletes n-2 right after writing n when n % 3 == 0; if that
    // delete was not acknowledged it may or may not have happened.
    std::optional<uint64_t> delete_in_flight;
    if (last_written % 3 == 0 && last_written >= 2 &&
        acked.count(last_written - 2) && acked[last_written - 2]) {
      delete_in_flight = last_written - 2;
    }

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    EXPECT_EQ(PendingRecordsOnDisk(dir), 0u) << "round " << round;
    size_t present = 0;
    if (delete_in_flight) {
      auto r = store->ReadChunk(IdOf(*delete_in_flight), 1, 0, 0);
      if (r.status().code() == ENOENT) {
        acked[*delete_in_flight] = false;
      } else {
        ASSERT_TRUE(r.ok()) << r.status().ToString();
      }
    }
    for (const auto& [n, alive] : acked) {
      auto r =
          store->ReadChunk(IdOf(n), 1, 0, static_cast<uint32_t>(SizeOf(n)));
      if (alive) {
        ASSERT_TRUE(r.ok()) << "round " << round << " chunk " << n << ": "
                            << r.status().ToString();
        ASSERT_EQ(*r, Payload(SizeOf(n), n)) << n;
        ++present;
      } else {
        EXPECT_EQ(r.status().code(), ENOENT) << "deleted chunk " << n;
      }
    }
    // The write in flight is all or nothing.
    auto r = store->ReadChunk(IdOf(in_flight), 1, 0,
                              static_cast<uint32_t>(SizeOf(in_flight)));
    if (r.ok()) {
      EXPECT_EQ(*r, Payload(SizeOf(in_flight), in_flight));
      acked[in_flight] = true;  // it made it; later rounds expect it
      ++present;
    } else {
      EXPECT_EQ(r.status().code(), ENOENT) << r.status().ToString();
    }
    ExpectNoGarbage(store.get(), dir, present);
    EXPECT_EQ(store->Stats()->chunks, present) << "round " << round;
    next = in_flight + 1;
  }
  EXPECT_GE(acked.size(), 30u);
}

// Eight writers share each group commit; a kill lands mid-batch. Every
// acknowledged chunk survives intact, every other one of the batch in
// flight is all or nothing, and no garbage outlives the reopen.
TEST(ChunkStoreCrashTest, KillNineMidGroupCommitIsAllOrNothingPerChunk) {
  constexpr int kThreads = 8;
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::map<uint64_t, bool> acked;  // n -> acknowledged
  uint64_t first = 0;
  // What the opens found in pending records (entries committed while their
  // batch was still syncing).
  uint64_t verified = 0, rolled_back = 0;
  for (int round = 0; round < 6; ++round) {
    int fd = -1;
    pid_t pid = Spawn(dir, first, kThreads, &fd);
    ASSERT_GT(pid, 0);
    const size_t want = 8 + rng() % 40;
    uint64_t top = first;
    for (size_t got = 0; got < want; ++got) {
      pollfd pfd{fd, POLLIN, 0};
      ASSERT_GT(::poll(&pfd, 1, 20000), 0)
          << "writer child made no progress for 20 s";
      Ack a;
      ASSERT_TRUE(ReadAck(fd, &a)) << "writer child exited early";
      acked[a.n] = true;
      top = std::max(top, a.n);
    }
    ::usleep(static_cast<useconds_t>(rng() % 4000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exit status " << status;
    Ack a;
    while (ReadAck(fd, &a)) {
      acked[a.n] = true;
      top = std::max(top, a.n);
    }
    ::close(fd);

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    verified += store->Counters().pending_verified;
    rolled_back += store->Counters().pending_rolled_back;
    EXPECT_EQ(PendingRecordsOnDisk(dir), 0u) << "round " << round;
    // Writer t writes first + t, first + t + kThreads, ...: nothing beyond
    // top + kThreads was started.
    const uint64_t end = top + kThreads + 1;
    size_t present = 0;
    for (uint64_t n = 0; n < end; ++n) {
      auto r =
          store->ReadChunk(IdOf(n), 1, 0, static_cast<uint32_t>(SizeOf(n)));
      if (acked.count(n)) {
        ASSERT_TRUE(r.ok()) << "round " << round << " chunk " << n << ": "
                            << r.status().ToString();
      }
      if (r.ok()) {
        ASSERT_EQ(*r, Payload(SizeOf(n), n)) << n;
        acked[n] = true;
        ++present;
      } else {
        ASSERT_EQ(r.status().code(), ENOENT) << r.status().ToString();
      }
    }
    ExpectNoGarbage(store.get(), dir, present);
    EXPECT_EQ(store->Stats()->chunks, present);
    first = end;
  }
  EXPECT_GE(acked.size(), 48u);
  std::printf("opens verified %" PRIu64 " and rolled back %" PRIu64
              " unconfirmed entries\n",
              verified, rolled_back);
}

// Patches and clones (versions sharing pieces) killed at random moments:
// after the reopen every acknowledged version reads back its exact bytes,
// the deleted ones are gone, the operations in flight are all or nothing
// each, and the segments' accounting matches what is left. `threads` is
// chunk_crash_child's (0: one op at a time; -1: ApplyChunkOps batches of
// `batch` n).
void KillNineMidPatchesAndClones(int threads, uint64_t batch) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // (n, version) -> acknowledged present (false: acknowledged deleted).
  std::map<std::pair<uint64_t, uint64_t>, bool> acked;
  uint64_t next = 0;
  for (int round = 0; round < 8; ++round) {
    int fd = -1;
    pid_t pid = Spawn(dir, next, threads, &fd);
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
      pollfd pfd{fd, POLLIN, 0};
      ASSERT_GT(::poll(&pfd, 1, 20000), 0)
          << "writer child made no progress for 20 s";
      Ack a;
      ASSERT_TRUE(ReadAck(fd, &a)) << "writer child exited early";
      take(a);
    }
    ::usleep(static_cast<useconds_t>(rng() % 4000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exit status " << status;
    Ack a;
    while (ReadAck(fd, &a)) take(a);
    ::close(fd);

    ChunkStoreOptions o;
    o.reserve_bytes = 0;
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    EXPECT_EQ(PendingRecordsOnDisk(dir), 0u) << "round " << round;
    size_t present = 0;
    // Up to the last n the batch in flight may have written.
    for (uint64_t n = 0; n <= top + batch; ++n) {
      const auto len = static_cast<uint32_t>(crash::PatchSizeOf(n));
      for (uint64_t v = 1; v <= 4; ++v) {
        auto r = store->ReadChunk(crash::PatchIdOf(n), v, 0, len);
        auto it = acked.find({n, v});
        // The delete of version 1 after the last patch (of the last
        // batch) may be in flight, or done with its 'D' records cut short
        // by the kill (a batch deletes all its n at once, then reports
        // them one by one).
        const bool maybe_deleted = n + batch > top && v == 1 &&
                                   (last_op == '4' || last_op == 'D');
        if (it != acked.end() && it->second && !maybe_deleted) {
          ASSERT_TRUE(r.ok()) << "round " << round << " n " << n << " v " << v
                              << ": " << r.status().ToString();
        }
        if (it != acked.end() && !it->second) {
          ASSERT_EQ(r.status().code(), ENOENT) << "deleted n " << n;
        }
        if (r.ok()) {
          ASSERT_EQ(*r, crash::PatchedContent(n, v))
              << "round " << round << " n " << n << " v " << v;
          acked[{n, v}] = true;  // in flight and made it
          ++present;
        } else {
          ASSERT_EQ(r.status().code(), ENOENT) << r.status().ToString();
          if (it != acked.end()) acked[{n, v}] = false;
        }
      }
    }
    EXPECT_EQ(store->Stats()->chunks, present) << "round " << round;
    for (const auto& seg : store->Segments()) {
      EXPECT_GT(seg.usage.live_entries, 0u) << "segment " << seg.seq;
      EXPECT_LE(seg.usage.live_bytes, seg.usage.end) << "segment " << seg.seq;
    }
    EXPECT_EQ(CountFiles(dir + "/segments", ".seg"), store->Segments().size());
    EXPECT_EQ(CountFiles(dir + "/tmp"), 0u);
    next = top + batch + 1;  // past what was in flight
  }
  EXPECT_GE(acked.size(), 20u);
}

TEST(ChunkStoreCrashTest, KillNineMidPatchesAndClonesKeepsAckedVersions) {
  KillNineMidPatchesAndClones(0, 1);
}

// The same through ApplyChunkOps: a batch's ops share one group commit.
TEST(ChunkStoreCrashTest, KillNineMidBatchedPatchesKeepsAckedVersions) {
  KillNineMidPatchesAndClones(-1, crash::kPatchBatch);
}

// An entry durable before its bytes (a crash between the index sync and the
// data sync of one batch), made by hand: entries and a pending record in the
// index, the bytes of two of them never written. The reopen rolls back
// exactly those (a new version removed, a rewrite's old entry put back),
// keeps the named entry whose bytes verify, and every acknowledged version.
TEST(ChunkStoreCrashTest, EntryDurableBeforeItsBytesIsRolledBackAtOpen) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  const size_t len = 3 * 4096 + 100;
  const std::vector<ChunkId> ids = {{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}};
  ChunkStoreOptions o;
  o.reserve_bytes = 0;
  o.compact_bytes_per_sec = 0;
  {
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE((*s)->WriteChunk(ids[i], 1, Payload(len, i)).ok());
    }
    EXPECT_EQ((*s)->Counters().pending_records, 0u);
  }
  // A clean close leaves no record behind: old stores look the same.
  ASSERT_EQ(PendingRecordsOnDisk(dir), 0u);
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options ro;
    ASSERT_TRUE(rocksdb::DB::Open(ro, dir + "/index", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::vector<ChunkIndexValue> v;
    for (const ChunkId& id : ids) {
      std::string raw_value;
      ASSERT_TRUE(db->Get({}, EncodeChunkKey(id, 1), &raw_value).ok());
      auto dec = DecodeChunkValue(raw_value);
      ASSERT_TRUE(dec.ok());
      ASSERT_EQ(dec->pieces.size(), 1u);
      v.push_back(*dec);
    }
    // ids[1]: its bytes never reached the disk (zeros where they were).
    const ChunkPiece pb = v[1].pieces[0];
    const std::string seg_b =
        dir + "/segments/" + chunk_paths::SegmentFileName(pb.segment);
    {
      UniqueFd fd(::open(seg_b.c_str(), O_WRONLY | O_CLOEXEC));
      ASSERT_TRUE(fd.valid());
      std::vector<uint8_t> zeros(SegmentExtentBytes(len), 0);
      ASSERT_EQ(::pwrite(fd.get(), zeros.data(), zeros.size(),
                         static_cast<off_t>(pb.segment_offset)),
                static_cast<ssize_t>(zeros.size()));
    }
    // ids[2]: rewritten (same bytes) to a fresh extent past every entry,
    // which was never written.
    uint64_t end = 0;
    for (const auto& x : v) {
      end = std::max(end, x.pieces[0].segment_offset + SegmentExtentBytes(len));
    }
    ChunkIndexValue c_new = v[2];
    c_new.pieces[0].segment_offset = end + 16 * kSegmentAlign;
    std::vector<PendingEntry> rec(3);
    rec[0].id = ids[0];  // verifies: kept
    rec[0].version = 1;
    rec[0].piece = v[0].pieces[0];
    rec[1].id = ids[1];
    rec[1].version = 1;
    rec[1].piece = pb;
    rec[2].id = ids[2];
    rec[2].version = 1;
    rec[2].piece = c_new.pieces[0];
    rec[2].has_old = true;
    rec[2].old = v[2];
    rocksdb::WriteBatch wb;
    wb.Put(EncodeChunkKey(ids[2], 1), EncodeChunkValue(c_new));
    wb.Put(EncodePendingKey(7), EncodePendingRecord(rec));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    ASSERT_TRUE(db->Write(wo, &wb).ok());
    ASSERT_TRUE(db->Close().ok());
  }
  ASSERT_EQ(PendingRecordsOnDisk(dir), 1u);
  for (int open = 0; open < 2; ++open) {
    SCOPED_TRACE("open " + std::to_string(open));
    auto s = ChunkStore::Open(dir, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto& store = *s;
    const ChunkStoreCounters c = store->Counters();
    EXPECT_EQ(c.pending_records, open == 0 ? 1u : 0u);
    EXPECT_EQ(c.pending_verified, open == 0 ? 1u : 0u);
    EXPECT_EQ(c.pending_rolled_back, open == 0 ? 2u : 0u);
    EXPECT_EQ(PendingRecordsOnDisk(dir), 0u);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto r = store->ReadChunk(ids[i], 1, 0, static_cast<uint32_t>(len));
      if (i == 1) {
        EXPECT_EQ(r.status().code(), ENOENT) << r.status().ToString();
        continue;
      }
      ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
      EXPECT_EQ(*r, Payload(len, i)) << i;
    }
    auto st = store->Stats();
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->chunks, 3u);
    EXPECT_EQ(st->crc_errors, 0u);
    ExpectNoGarbage(store.get(), dir, 3);
  }
}

}  // namespace
}  // namespace stripefs
