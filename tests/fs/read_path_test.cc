// Unit tests of StripeFs's read path, driven directly (no kernel, no mount:
// replies are recorded by FakeInFlight) over an in-process volume whose
// metadata service counts the calls it gets: a READ of a cached, unchanged
// file makes no metadata call, OPEN revalidates against another client's
// commits (close-to-open), and reading creates no StripeWriter.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>

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
  std::string Read(uint64_t ino, uint64_t off, uint32_t size) {
    RecordedReply rec;
    FakeInFlight f(&rec);
    fuse_read_in in{};
    in.offset = off;
    in.size = size;
    fs_->Read(fuse::Replier(&f, nullptr), ino, in);
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, 0);
    return rec.body;
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

}  // namespace
}  // namespace stripefs::fs
