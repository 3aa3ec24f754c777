// Unit tests of StripeFs's read path, driven directly (no kernel, no mount:
// replies are recorded by FakeInFlight) over an in-process volume whose
// metadata service counts the calls it gets: a READ of a cached, unchanged
// file makes no metadata call, OPEN revalidates against another client's
// commits (close-to-open), and reading creates no StripeWriter.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "fs/stripe_fs.h"
#include "tests/client/counting_meta_service.h"
#include "tests/support/fake_inflight.h"
#include "tests/support/fault_injecting_chunk_service.h"
#include "tests/support/in_process_volume.h"
#include "tests/support/random_bytes.h"

namespace stripefs::fs {
namespace {

using namespace fuse_abi;  // NOLINT
using stripefs::testing::CountingMetaService;
using stripefs::testing::FakeInFlight;
using stripefs::testing::FaultInjectingChunkService;
using stripefs::testing::InProcessVolume;
using stripefs::testing::RandomBytes;
using stripefs::testing::RecordedReply;

class ReadPathTest : public ::testing::Test {
 protected:
  static constexpr int kServers = 6;

  void SetUp() override {
    stripefs::testing::InProcessVolumeOptions o;
    o.servers = kServers;
    o.geometry = Geometry{4, 2, 4096};
    o.wrap_meta = stripefs::testing::CountingWrapper(&counting_);
    auto v = InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    volume_ = &vol_->volume();
    StripeFsOptions fo;
    fo.purge_orphans_at_start = false;
    fs_ = std::make_unique<StripeFs>(volume_, fo);
  }
  void TearDown() override {
    fs_.reset();
    other_.reset();
    other_servers_.reset();
    vol_.reset();
  }

  uint64_t S() { return volume_->client().stripe_size(); }
  uint64_t NewFile(const std::string& name) {
    auto a = volume_->meta().MkNode(kRootInode, name, S_IFREG | 0644, 0, 0, 0);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->ino : 0;
  }
  int MetaReads() {
    return counting_->getattr_calls.load() + counting_->getstripes_calls.load();
  }

  void Open(uint64_t ino) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse_open_in in{};
    fs_->Open(fuse::Replier(&f, nullptr), ino, in);
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.error, 0);
  }
  void Release(uint64_t ino) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse_release_in in{};
    fs_->Release(fuse::Replier(&f, nullptr), ino, in);
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.error, 0);
  }
  void Write(uint64_t ino, uint64_t off, const std::vector<uint8_t>& data) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse::WriteRequest w;
    w.in.offset = off;
    w.in.size = static_cast<uint32_t>(data.size());
    w.data = data;
    fs_->Write(fuse::Replier(&f, nullptr), ino, w);
    ASSERT_TRUE(rec.done);
    ASSERT_EQ(rec.error, 0);
  }
  // READ; *body (when given) records where its reply body starts.
  std::string Read(uint64_t ino, uint64_t off, uint32_t size,
                   const void** body = nullptr) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse_read_in in{};
    in.offset = off;
    in.size = size;
    fs_->Read(fuse::Replier(&f, nullptr), ino, in);
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, 0);
    if (body) *body = rec.first_base;
    return rec.body;
  }
  // The attributes of a successful attribute reply (GETATTR, SETATTR).
  static fuse_attr AttrOf(const RecordedReply& rec) {
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, 0);
    fuse_attr_out out{};
    EXPECT_EQ(rec.body.size(), sizeof(out));
    std::memcpy(&out, rec.body.data(), std::min(sizeof(out), rec.body.size()));
    return out.attr;
  }
  fuse_attr GetAttr(uint64_t ino) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse_getattr_in in{};
    fs_->GetAttr(fuse::Replier(&f, nullptr), ino, in);
    return AttrOf(rec);
  }
  // st_blocks as metadata has the file now: every committed stripe's data
  // bytes (k * chunk_len), cut at EOF (the test's own count).
  uint64_t CommittedBlocks(uint64_t ino) {
    auto a = volume_->meta().GetAttr(ino);
    EXPECT_TRUE(a.ok());
    if (!a.ok() || a->size == 0) return 0;
    auto map = volume_->meta().GetStripes(ino, 0, (a->size - 1) / S() + 1);
    EXPECT_TRUE(map.ok());
    uint64_t bytes = 0;
    for (const auto& sv : map.ok() ? *map : std::vector<StripeVersion>{}) {
      const uint64_t k = volume_->geometry().k;
      bytes += std::min<uint64_t>(k * sv.chunk_len, a->size - sv.stripe * S());
    }
    return (bytes + 511) / 512;
  }
  static std::string Str(const std::vector<uint8_t>& v, uint64_t off = 0,
                         uint64_t n = UINT64_MAX) {
    n = std::min<uint64_t>(n, v.size() - off);
    return std::string(reinterpret_cast<const char*>(v.data() + off), n);
  }
  // A second client of the same metadata and chunk stores (another mount).
  StripeClient& Other() {
    if (!other_) {
      std::vector<std::unique_ptr<ChunkService>> wrappers;
      for (size_t i = 0; i < vol_->servers(); ++i)
        wrappers.push_back(
            std::make_unique<FaultInjectingChunkService>(&vol_->store(i)));
      other_servers_ = std::make_unique<LocalChunkServers>(std::move(wrappers));
      auto c = StripeClient::Create(&volume_->meta(), other_servers_.get());
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      other_ = std::move(c).value();
    }
    return *other_;
  }

  std::unique_ptr<InProcessVolume> vol_;
  Volume* volume_ = nullptr;                 // vol_'s
  CountingMetaService* counting_ = nullptr;  // owned by volume_
  std::unique_ptr<StripeFs> fs_;
  std::unique_ptr<LocalChunkServers> other_servers_;
  std::unique_ptr<StripeClient> other_;
};

// fsync, fsyncdir and syncfs wait for metadata durability (a metad may
// acknowledge namespace changes before its WAL sync).
TEST_F(ReadPathTest, FsyncFsyncDirAndSyncFsSyncMetadata) {
  const uint64_t f = NewFile("f");
  auto call = [&](auto&& op) {
    RecordedReply rec;
    FakeInFlight fl(&rec);
    op(fuse::Replier(&fl, nullptr));
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, 0);
  };
  const int before = counting_->sync_calls.load();
  fuse_fsync_in in{};
  call([&](fuse::Replier r) { fs_->FsyncDir(std::move(r), kRootInode, in); });
  EXPECT_EQ(counting_->sync_calls.load(), before + 1);
  Open(f);
  Write(f, 0, RandomBytes(100, 1));
  call([&](fuse::Replier r) { fs_->Fsync(std::move(r), f, in); });
  EXPECT_EQ(counting_->sync_calls.load(), before + 2);
  call([&](fuse::Replier r) { fs_->SyncFs(std::move(r), kRootInode); });
  EXPECT_EQ(counting_->sync_calls.load(), before + 3);
  Release(f);
}

// SETATTR answers with the attributes metadata's SetAttr returned: no
// GetAttr after it (the kernel sends a ctime-only SETATTR after every
// UNLINK of a file), including a truncate of a file being written; a chmod
// re-reads them (its ACL update may move ctime again).
TEST_F(ReadPathTest, SetAttrMakesOneMetadataCall) {
  const uint64_t f = NewFile("f");
  auto setattr = [&](fuse_setattr_in in) {
    RecordedReply rec;
    FakeInFlight fl(&rec);
    fs_->SetAttr(fuse::Replier(&fl, nullptr), f, in);
    return AttrOf(rec);
  };
  fuse_setattr_in ctime{};
  ctime.valid = FATTR_CTIME;
  ctime.ctime = 1234567890;
  ctime.ctimensec = 42;
  int getattr = counting_->getattr_calls.load();
  fuse_attr a = setattr(ctime);
  EXPECT_EQ(counting_->getattr_calls.load(), getattr);
  EXPECT_EQ(a.ctime, 1234567890u);
  EXPECT_EQ(a.ctimensec, 42u);
  EXPECT_EQ(a.ino, f);
  auto meta = volume_->meta().GetAttr(f);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->ctime.sec, 1234567890);
  // A file this mount is writing: the answer's size covers the buffered
  // bytes (no GetAttr either), and a truncate answers the size asked for.
  // Less than a stripe and no idle flush: no background send or commit
  // makes metadata calls meanwhile.
  fs_.reset();
  StripeFsOptions fo;
  fo.purge_orphans_at_start = false;
  fo.idle_flush = std::chrono::hours(1);
  fs_ = std::make_unique<StripeFs>(volume_, fo);
  Open(f);
  Write(f, 0, RandomBytes(S() / 2, 3));
  fuse_setattr_in mtime{};
  mtime.valid = FATTR_MTIME;
  mtime.mtime = 1500000000;
  getattr = counting_->getattr_calls.load();
  a = setattr(mtime);
  EXPECT_EQ(counting_->getattr_calls.load(), getattr);
  EXPECT_EQ(a.size, S() / 2);
  EXPECT_EQ(a.mtime, 1500000000u);
  fuse_setattr_in trunc{};
  trunc.valid = FATTR_SIZE;
  trunc.size = S() / 4;
  a = setattr(trunc);
  EXPECT_EQ(a.size, S() / 4);
  Release(f);
  auto after = volume_->meta().GetAttr(f);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size, S() / 4);
  fuse_setattr_in chmod{};
  chmod.valid = FATTR_MODE;
  chmod.mode = 0600;
  getattr = counting_->getattr_calls.load();
  a = setattr(chmod);
  EXPECT_EQ(a.mode & 07777, 0600u);
  EXPECT_GE(counting_->getattr_calls.load(), getattr + 1);
}

TEST_F(ReadPathTest, ReadOfAnUnchangedFileMakesNoMetadataCall) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(3 * S() + 500, 1);
  Open(ino);
  Write(ino, 0, data);
  Release(ino);  // flushes; the writer goes with the last close
  EXPECT_EQ(fs_->live_writers(), 0u);
  Open(ino);  // revalidates: one GetAttr
  EXPECT_EQ(Read(ino, 0, 4096), Str(data, 0, 4096));  // reads the map once
  const int before = MetaReads();
  for (uint64_t off = 0; off < data.size(); off += 5000)
    ASSERT_EQ(Read(ino, off, 4096), Str(data, off, 4096)) << off;
  EXPECT_EQ(Read(ino, data.size() - 10, 4096), Str(data, data.size() - 10));
  EXPECT_EQ(MetaReads(), before);  // no GetAttr, no GetStripes
  Release(ino);
}

// st_blocks counts the file's committed stripes, which takes a scan of
// its whole stripe map. A GETATTR of an unchanged file takes the count kept
// at its change marker: one GetAttr, no GetStripes (it used to scan the map
// every time: ~15 % of the daemon's CPU in 4 KiB random reads on io-uring,
// where the kernel re-asks the size every attribute timeout). Every change
// of the map moves the marker: another client's writes and truncates, and
// this mount's own writes (a buffered stripe counts whole up to EOF).
TEST_F(ReadPathTest, GetAttrOfAnUnchangedFileScansItsMapOnce) {
  const uint64_t ino = NewFile("blocks");
  ASSERT_TRUE(Other().Write(ino, 0, RandomBytes(S(), 5)).ok());
  ASSERT_TRUE(Other().Write(ino, 2 * S(), RandomBytes(S() / 2, 6)).ok());
  uint64_t want = CommittedBlocks(ino);
  ASSERT_GT(want, 0u);
  EXPECT_EQ(GetAttr(ino).blocks, want);  // counts: scans the map once
  const int stripes_before = counting_->getstripes_calls.load();
  const int attrs_before = counting_->getattr_calls.load();
  const uint64_t kept_before = fs_->counters().stored_bytes_kept.load();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(GetAttr(ino).blocks, want);
  EXPECT_EQ(counting_->getstripes_calls.load(), stripes_before);
  EXPECT_EQ(counting_->getattr_calls.load(), attrs_before + 3);
  EXPECT_EQ(fs_->counters().stored_bytes_kept.load(), kept_before + 3);

  // Another client fills the hole in stripe 1, then cuts the file short.
  ASSERT_TRUE(Other().Write(ino, S(), RandomBytes(S(), 7)).ok());
  const uint64_t filled = CommittedBlocks(ino);
  EXPECT_GT(filled, want);
  EXPECT_EQ(GetAttr(ino).blocks, filled);
  auto size = volume_->meta().GetAttr(ino);
  ASSERT_TRUE(size.ok());
  auto t = Other().Truncate(ino, size->size, S() + 7);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  want = CommittedBlocks(ino);
  EXPECT_LT(want, filled);
  EXPECT_EQ(GetAttr(ino).blocks, want);

  // This mount writes a quarter of stripe 3 (the new EOF): buffered, it
  // counts up to EOF; committed, as stored.
  Open(ino);
  Write(ino, 3 * S(), RandomBytes(S() / 4, 8));
  EXPECT_EQ(GetAttr(ino).blocks, want + S() / 4 / 512);
  Release(ino);
  want = CommittedBlocks(ino);
  EXPECT_EQ(GetAttr(ino).blocks, want);
  EXPECT_EQ(GetAttr(ino).blocks, want);
}

// A READ tried without blocking (ctx.must_not_block, as on an io-uring
// queue thread) is answered with the right bytes from memory, or given back
// (Replier::WouldBlock: no reply, nothing counted) to be served again on a
// worker (ctx.retried), which reads as usual. Chunk services that cannot
// try (remote ones) make every tried READ a give-back; once the map,
// attributes, index entries and page cache are warm, tried READs of the
// in-process stores are served, with no metadata call.
TEST_F(ReadPathTest, TriedReadIsServedFromMemoryOrGivenBack) {
  const uint64_t ino = NewFile("f");
  auto data = RandomBytes(3 * S() + 500, 9);
  Open(ino);
  Write(ino, 0, data);
  Release(ino);  // flushed; no writer left
  Open(ino);
  // Tries `size` bytes at `off`: true when served (bytes checked), false
  // when given back, after which the retried READ is served as usual.
  auto tried = [&](uint64_t off, uint32_t size) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    f.ctx.must_not_block = true;
    fuse_read_in in{};
    in.offset = off;
    in.size = size;
    fs_->Read(fuse::Replier(&f, nullptr), ino, in);
    const std::string want = Str(data, off, size);
    if (rec.given_back == 0) {
      EXPECT_TRUE(rec.done) << off;
      EXPECT_EQ(rec.error, 0) << off;
      EXPECT_EQ(rec.body, want) << off;
      return true;
    }
    EXPECT_EQ(rec.given_back, 1) << off;
    EXPECT_FALSE(rec.done) << "given back and answered at " << off;
    f.ctx.must_not_block = false;
    f.ctx.retried = true;
    fs_->Read(fuse::Replier(&f, nullptr), ino, in);
    EXPECT_TRUE(rec.done) << off;
    EXPECT_EQ(rec.error, 0) << off;
    EXPECT_EQ(rec.body, want) << off;
    return false;
  };
  // Services that cannot try (the default, as over the network): every
  // tried READ is given back, and answered right by its retry.
  const uint64_t reads_before = fs_->counters().read_requests.load();
  for (uint64_t off = 0; off < data.size(); off += 7000)
    EXPECT_FALSE(tried(off, 4096)) << off;
  const uint64_t tries = (data.size() + 6999) / 7000;
  // Each READ counted once, however often it was dispatched.
  EXPECT_EQ(fs_->counters().read_requests.load() - reads_before, tries);
  // In-process stores that try: cold or warm, the bytes are right; warm
  // (read once as usual just above), they are served from memory, with
  // no metadata call.
  for (size_t i = 0; i < vol_->servers(); ++i)
    vol_->service<FaultInjectingChunkService>(i)->try_reads = true;
  const int meta = MetaReads();
  int served = 0;
  for (uint64_t off = 0; off < data.size(); off += 7000)
    served += tried(off, 4096) ? 1 : 0;
  EXPECT_GT(served, 0) << "no tried READ was served from memory";
  EXPECT_EQ(MetaReads(), meta);
  // At EOF: empty, either way.
  tried(data.size(), 4096);
  Release(ino);
}

TEST_F(ReadPathTest, OpenSeesAnotherClientsWriteSizeChangeAndOverwrite) {
  const uint64_t ino = NewFile("shared");
  auto data = RandomBytes(2 * S(), 2);
  ASSERT_TRUE(Other().Write(ino, 0, data).ok());
  Open(ino);
  EXPECT_EQ(Read(ino, 0, static_cast<uint32_t>(3 * S())), Str(data));
  Release(ino);
  // The other client overwrites a cached stripe (its old version still
  // readable: not collected yet) and grows the file.
  auto patch = RandomBytes(S(), 3);
  auto tail = RandomBytes(S() / 2, 4);
  ASSERT_TRUE(Other().Write(ino, 0, patch).ok());
  ASSERT_TRUE(Other().Write(ino, 2 * S(), tail).ok());
  std::copy(patch.begin(), patch.end(), data.begin());
  data.insert(data.end(), tail.begin(), tail.end());
  Open(ino);
  EXPECT_EQ(Read(ino, 0, static_cast<uint32_t>(3 * S())), Str(data));
  Release(ino);
  // ... and shrinks it.
  auto t = Other().Truncate(ino, data.size(), S() + 7);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  data.resize(S() + 7);
  Open(ino);
  EXPECT_EQ(Read(ino, 0, static_cast<uint32_t>(3 * S())), Str(data));
  Release(ino);
}

// A file this mount is writing: its READs use the writer's copy of the
// committed size, so buffered-only writing costs no metadata call per READ
// (it used to be one GetAttr per READ); a commit forgets the size (one
// GetAttr at the next READ), and OPEN's revalidation makes the writer see
// another client's growth (close-to-open).
TEST_F(ReadPathTest, ReadsOfAFileBeingWrittenMakeNoGetAttrEach) {
  const uint64_t ino = NewFile("w");
  auto data = RandomBytes(S() / 2, 21);
  Open(ino);
  Write(ino, 0, data);  // half a stripe: stays buffered
  ASSERT_EQ(fs_->live_writers(), 1u);
  auto fetches = [&] {
    return fs_->StatsJson()["coalescing"]["read_size_fetches"].get<uint64_t>();
  };
  EXPECT_EQ(Read(ino, 0, 4096), Str(data, 0, 4096));
  const int getattrs = counting_->getattr_calls.load();
  const uint64_t f0 = fetches();
  EXPECT_LE(f0, 1u);
  for (uint64_t off = 0; off < data.size(); off += 1000)
    ASSERT_EQ(Read(ino, off, 4096), Str(data, off, 4096)) << off;
  EXPECT_EQ(Read(ino, data.size() - 5, 4096), Str(data, data.size() - 5));
  EXPECT_EQ(Read(ino, data.size(), 4096), "");
  EXPECT_EQ(counting_->getattr_calls.load(), getattrs);
  EXPECT_EQ(fetches(), f0);
  // Complete the stripe and more: the commit of stripe 0 moves the size;
  // the reads after it see every byte (buffered or committed).
  auto more = RandomBytes(S() + 100, 22);
  Write(ino, data.size(), more);
  data.insert(data.end(), more.begin(), more.end());
  for (int round = 0; round < 2; ++round) {
    for (uint64_t off = 0; off < data.size(); off += 777)
      ASSERT_EQ(Read(ino, off, 4096), Str(data, off, 4096)) << off;
  }
  // One fetch per commit at most (stripe 0 went out; the rest is buffered).
  EXPECT_LE(fetches(), f0 + 1);
  // Another client grows the file past our data; OPEN revalidates and our
  // writer's READs see the new size and bytes.
  auto tail = RandomBytes(1000, 23);
  ASSERT_TRUE(Other().Write(ino, 4 * S(), tail).ok());
  Open(ino);
  EXPECT_EQ(Read(ino, 4 * S(), 4096), Str(tail));
  auto zeros = Read(ino, 3 * S(), 16);
  EXPECT_EQ(zeros, std::string(16, '\0'));
  Release(ino);
  Release(ino);
}

TEST_F(ReadPathTest, ReadersCreateNoWriters) {
  std::vector<uint64_t> files;
  for (int i = 0; i < 20; ++i) {
    files.push_back(NewFile("r" + std::to_string(i)));
    ASSERT_TRUE(Other().Write(files.back(), 0, RandomBytes(1000, 10 + i)).ok());
  }
  for (uint64_t ino : files) Open(ino);
  for (uint64_t ino : files) EXPECT_EQ(Read(ino, 0, 4096).size(), 1000u);
  EXPECT_EQ(fs_->live_writers(), 0u);
  EXPECT_EQ(fs_->StatsJson()["coalescing"]["live_writers"], 0u);
  // A writer appears with the first WRITE and goes with the last close.
  Write(files[0], 0, RandomBytes(100, 99));
  EXPECT_EQ(fs_->live_writers(), 1u);
  for (uint64_t ino : files) Release(ino);
  EXPECT_EQ(fs_->live_writers(), 0u);
}

// Sequential READs of stripe size and of sizes that straddle stripes, each
// pass over a cache warm from the last: every reply is byte-exact in a
// poisoned reply buffer (a READ of full stripes no longer zeroes it first)
// and comes from read-ahead stripes within the cache budget.
TEST_F(ReadPathTest, SequentialReadsOfAnySizeAreExactFromReadAheadStripes) {
  auto data = RandomBytes(12 * S() + 999, 21);
  const uint64_t ino = NewFile("seq");
  Open(ino);
  Write(ino, 0, data);
  Release(ino);
  Open(ino);
  for (uint64_t piece : {S(), S() / 2 + 5, 3 * S() / 2}) {
    std::string got;
    for (uint64_t off = 0; off < data.size(); off += piece) {
      const std::string r = Read(ino, off, static_cast<uint32_t>(piece));
      ASSERT_EQ(r, Str(data, off, piece)) << "piece " << piece << " at " << off;
      got += r;
    }
    EXPECT_EQ(got, Str(data)) << piece;
  }
  const auto c = volume_->client().counters();
  EXPECT_GT(c.read_ahead_loads, 0u);
  EXPECT_GT(c.stripe_cache_hits, 0u);
  EXPECT_LE(c.stripe_cache_bytes, StripeClientOptions{}.read_cache_bytes);
  Release(ino);
}

TEST_F(ReadPathTest, ReadAheadStripesNeverOutliveAWriteOnEitherMount) {
  auto data = RandomBytes(10 * S(), 22);
  const uint64_t ino = NewFile("ra");
  Open(ino);
  Write(ino, 0, data);
  Release(ino);
  auto read_all = [&] {
    std::string got;
    for (uint64_t off = 0; off < data.size(); off += S())
      got += Read(ino, off, static_cast<uint32_t>(S()));
    return got;
  };
  Open(ino);
  EXPECT_EQ(read_all(), Str(data));  // every stripe read ahead and cached
  ASSERT_GT(volume_->client().counters().read_ahead_loads, 0u);
  Release(ino);
  // A write on this mount: its READs and the next sequential pass see it.
  auto mine = RandomBytes(S() + 100, 23);
  Open(ino);
  Write(ino, 3 * S() - 50, mine);
  std::copy(mine.begin(), mine.end(), data.begin() + 3 * S() - 50);
  EXPECT_EQ(read_all(), Str(data));
  Release(ino);
  Open(ino);
  EXPECT_EQ(read_all(), Str(data));
  Release(ino);
  // Another mount writes and closes; this one reopens (close-to-open).
  auto theirs = RandomBytes(2 * S(), 24);
  ASSERT_TRUE(Other().Write(ino, 6 * S(), theirs).ok());
  std::copy(theirs.begin(), theirs.end(), data.begin() + 6 * S());
  Open(ino);
  EXPECT_EQ(read_all(), Str(data));
  Release(ino);
}

TEST_F(ReadPathTest, HolesAndUnstoredColumnsReadAsZerosInAReusedBuffer) {
  // Stripe 0 stores columns [0, 100) only (chunk_len 100: its first 100
  // bytes), stripes 1-2 are holes, stripe 3 is full: the reply buffer is
  // poisoned (FakeInFlight), so every zero must be written.
  const uint64_t ino = NewFile("sparse");
  auto a = RandomBytes(100, 25);
  auto full = RandomBytes(S(), 27);
  ASSERT_TRUE(Other().Write(ino, 0, a).ok());
  ASSERT_TRUE(Other().Write(ino, 3 * S(), full).ok());
  std::vector<uint8_t> want(4 * S(), 0);
  std::copy(a.begin(), a.end(), want.begin());
  std::copy(full.begin(), full.end(), want.begin() + 3 * S());
  Open(ino);
  EXPECT_EQ(Read(ino, 0, static_cast<uint32_t>(4 * S())), Str(want));
  for (uint64_t off = 0; off < want.size(); off += 3000)
    ASSERT_EQ(Read(ino, off, 3000), Str(want, off, 3000)) << off;
  Release(ino);
}

// A chunk service whose reads can be bounded (as RemoteChunkService's are),
// counting which read path the client takes, with injectable failures of
// the bounded read.
class DirectReadChunkService final : public FaultInjectingChunkService {
 public:
  explicit DirectReadChunkService(ChunkService* inner)
      : FaultInjectingChunkService(inner), inner_(inner) {}

  std::atomic<int> vector_reads{0};  // ReadChunk (a vector per read)
  std::atomic<int> direct_reads{0};  // ReadChunkIntoBy (caller's buffer)
  std::atomic<const uint8_t*> last_direct_dst{nullptr};
  // Returned by ReadChunkIntoBy instead of reading (ok: read).
  Status fail_direct;
  // ReadChunkIntoBy waits until its deadline, then fails ETIMEDOUT.
  std::atomic<bool> slow{false};

  Result<std::vector<uint8_t>> ReadChunk(const ChunkId& id, uint64_t version,
                                         uint32_t offset,
                                         uint32_t length) override {
    ++vector_reads;
    return FaultInjectingChunkService::ReadChunk(id, version, offset, length);
  }
  Status ReadChunkIntoBy(
      const ChunkId& id, uint64_t version, uint32_t offset,
      std::span<uint8_t> out,
      std::chrono::steady_clock::time_point deadline) override {
    ++direct_reads;
    last_direct_dst = out.data();
    if (slow) {
      std::this_thread::sleep_until(deadline);
      return Status(ETIMEDOUT, "injected: slow server");
    }
    if (!fail_direct.ok()) return fail_direct;
    return inner_->ReadChunkInto(id, version, offset, out);
  }

 private:
  ChunkService* inner_;
};

class DirectReadTest : public ReadPathTest {
 protected:
  void SetUp() override {
    stripefs::testing::InProcessVolumeOptions o;
    o.servers = kServers;
    o.geometry = Geometry{4, 2, 4096};
    o.client.read_deadline = std::chrono::milliseconds(100);
    o.wrap_meta = stripefs::testing::CountingWrapper(&counting_);
    o.wrap_chunks = [](ChunkService* s) -> std::unique_ptr<ChunkService> {
      return std::make_unique<DirectReadChunkService>(s);
    };
    auto v = InProcessVolume::Open(o);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vol_ = std::move(v).value();
    volume_ = &vol_->volume();
    StripeFsOptions fo;
    fo.purge_orphans_at_start = false;
    fs_ = std::make_unique<StripeFs>(volume_, fo);
  }
  DirectReadChunkService& Server(size_t i) {
    return *vol_->service<DirectReadChunkService>(i);
  }
  int Sum(std::atomic<int> DirectReadChunkService::*field) {
    int n = 0;
    for (size_t i = 0; i < vol_->servers(); ++i) n += (Server(i).*field).load();
    return n;
  }
  // The server holding data cell `cell` of stripe 0 of `ino`.
  size_t ServerOfCell(uint64_t ino, uint32_t cell) {
    // InProcessVolume registers store i as server id i.
    return volume_->client().view().LayoutFor(ino, 0).servers[cell].id;
  }
  uint64_t WrittenFile(const std::vector<uint8_t>& data) {
    const uint64_t ino = NewFile("d");
    Open(ino);
    Write(ino, 0, data);
    Release(ino);
    Open(ino);
    return ino;
  }
};

TEST_F(DirectReadTest, CachedStripeReadGoesStraightIntoTheReplyBuffer) {
  auto data = RandomBytes(2 * S(), 5);
  const uint64_t ino = WrittenFile(data);
  EXPECT_EQ(Read(ino, 0, 4096), Str(data, 0, 4096));  // caches the map
  const int meta = MetaReads();
  const int vectors = Sum(&DirectReadChunkService::vector_reads);
  for (uint64_t off = 100; off + 3000 < data.size(); off += 4096 * 3 + 7) {
    const int direct = Sum(&DirectReadChunkService::direct_reads);
    const void* body = nullptr;
    // Inside one cell: one bounded read, into the reply itself.
    const uint64_t in_cell = std::min<uint64_t>(3000, 4096 - off % 4096);
    ASSERT_EQ(Read(ino, off, static_cast<uint32_t>(in_cell), &body),
              Str(data, off, in_cell));
    EXPECT_EQ(Sum(&DirectReadChunkService::direct_reads), direct + 1) << off;
    bool into_reply = false;
    for (size_t i = 0; i < vol_->servers(); ++i)
      into_reply |= Server(i).last_direct_dst.load() == body;
    EXPECT_TRUE(into_reply) << "the chunk bytes were copied at " << off;
  }
  // Across cells and stripes: one bounded read per cell, no vector path.
  EXPECT_EQ(Read(ino, 4000, static_cast<uint32_t>(S())), Str(data, 4000, S()));
  EXPECT_EQ(MetaReads(), meta);  // no GetAttr, no GetStripes
  EXPECT_EQ(Sum(&DirectReadChunkService::vector_reads), vectors);
  EXPECT_EQ(volume_->client().counters().chunk_read_errors, 0u);
  Release(ino);
}

TEST_F(DirectReadTest, AFailedDirectReadIsRebuiltWithoutAskingAgain) {
  auto data = RandomBytes(S(), 6);
  const uint64_t ino = WrittenFile(data);
  DirectReadChunkService& bad = Server(ServerOfCell(ino, 1));
  bad.fail_direct = Status::Corruption("injected: CRC mismatch");
  const int before = bad.direct_reads.load() + bad.vector_reads.load();
  EXPECT_EQ(Read(ino, 4096 + 10, 2000), Str(data, 4096 + 10, 2000));
  EXPECT_EQ(bad.direct_reads.load() + bad.vector_reads.load(),
            before + 1);  // asked once
  const auto c = volume_->client().counters();
  EXPECT_EQ(c.chunk_read_errors, 1u);
  EXPECT_EQ(c.crc_errors, 1u);
  EXPECT_EQ(c.degraded_reads, 1u);
  Release(ino);
}

TEST_F(DirectReadTest, ASlowDirectReadIsCutAtTheDeadlineAndReadAround) {
  auto data = RandomBytes(S(), 7);
  const uint64_t ino = WrittenFile(data);
  DirectReadChunkService& slow = Server(ServerOfCell(ino, 2));
  slow.slow = true;
  EXPECT_EQ(Read(ino, 2 * 4096, 4096), Str(data, 2 * 4096, 4096));
  auto c = volume_->client().counters();
  EXPECT_EQ(c.slow_chunk_reads, 1u);
  EXPECT_EQ(c.degraded_reads, 1u);
  // Now suspect: the next READ reads around it without waiting on it.
  const int asked = slow.direct_reads.load();
  EXPECT_EQ(Read(ino, 2 * 4096 + 8, 100), Str(data, 2 * 4096 + 8, 100));
  EXPECT_EQ(slow.direct_reads.load(), asked);
  Release(ino);
}

}  // namespace
}  // namespace stripefs::fs
