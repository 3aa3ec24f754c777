// A whole embedded stripefs mount across power cuts: the volume (metadata
// RocksDB and the k+m chunk stores) lives on LossyFs and is served by a
// `stripefs mount` daemon (the real binary). Each round, fio writes a file
// with an fsync schedule and verify headers to the end (end_fsync), then a
// second fio writes another file with fsyncs and is SIGKILLed at a seeded
// moment; the daemon is SIGKILLed and the power cut (every unsynced write
// and directory change dropped, the last write torn at a 512-byte sector).
// The volume is mounted again and must hold every fsync'd byte of every
// earlier round (`fio --verify_only`, and the sizes), its metadata
// invariants (link counts, orphans, stripes, statfs) and a clean scrub
// (nothing to rebuild, nothing failed). The file in flight at the cut must
// read without an error.
//
// CI runs 3 cuts; STRIPEFS_SOAK=1 (ctest label soak) runs 20. The seed is
// printed; LOSSYFS_SEED=<n> replays the sizes, fsync schedules, kill
// moments and tears (the daemon's timing is not replayed).
// Needs root, /dev/fuse, the stripefs binary and fio; skips otherwise,
// with the reason.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/client/repairer.h"
#include "tests/fs/fs_mount.h"
#include "tests/fuse/mounted_session.h"
#include "tests/lossyfs/lossy_fs.h"
#include "tests/meta/meta_test_util.h"
#include "tests/support/run_command.h"

namespace stripefs::lossyfs {
namespace {

using fs::testing::FsMount;
using fs::testing::FsMountOptions;
using fuse::testing::MountedSession;
using stripefs::testing::RunCommand;

// One fio job that writes a whole file with verify headers and an fsync
// schedule; the same arguments plus --verify_only check it later.
struct FioFile {
  std::string path;
  uint64_t size = 0;
  uint64_t bs = 0;
  int fsync_every = 1;
  bool random = false;
  uint64_t randseed = 0;

  std::string Args() const {
    return "fio --name=w --filename=" + path +
           " --rw=" + (random ? "randwrite" : "write") +
           " --bs=" + std::to_string(bs) + " --size=" + std::to_string(size) +
           " --thread --ioengine=psync --fsync=" + std::to_string(fsync_every) +
           " --end_fsync=1 --verify=crc32c --verify_state_save=0 --randseed=" +
           std::to_string(randseed) + " --output-format=terse";
  }
};

FioFile RandomFile(const std::string& path, std::mt19937_64& rng,
                   uint64_t max_mib) {
  static constexpr uint64_t kBlocks[] = {4096, 16384, 65536, 262144, 1 << 20};
  FioFile f;
  f.path = path;
  f.bs = kBlocks[rng() % std::size(kBlocks)];
  // At most 48 blocks: small blocks cost a stripe patch each (CI time).
  const uint64_t blocks_max = std::min<uint64_t>(48, (max_mib << 20) / f.bs);
  f.size = f.bs * (1 + rng() % blocks_max);
  f.fsync_every = 1 + static_cast<int>(rng() % 8);
  f.random = rng() % 2;
  f.randseed = rng() >> 33;  // fio takes a signed 64-bit seed
  return f;
}

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size)
                                        : UINT64_MAX;
}

class MountPowerCutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why =
        fs::testing::BackendSkipMessage(fs::testing::FsBackend::kEmbedded);
    if (!why.empty()) GTEST_SKIP() << why;
    if (RunCommand("fio --version >/dev/null 2>&1").rc != 0)
      GTEST_SKIP() << "fio is not installed (apt-get install fio): the mount "
                      "power-cut test writes and verifies with fio";
    const char* env = std::getenv("LOSSYFS_SEED");
    seed_ = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("mount power cuts: seed %llu (replay: LOSSYFS_SEED=%llu)\n",
                static_cast<unsigned long long>(seed_),
                static_cast<unsigned long long>(seed_));
    lossy_ = std::make_unique<LossyFs>(seed_);
    fuse::MountOptions mo;
    mo.fsname = mo.subtype = "lossyfs";
    auto m = MountedSession::Start(lossy_.get(),
                                   LossyFs::SessionOptionsForLossyFs(), mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    lossy_mount_ = std::move(*m);
  }
  void TearDown() override {
    if (fio_pid_ > 0) {
      ::kill(fio_pid_, SIGKILL);
      ::waitpid(fio_pid_, nullptr, 0);
    }
    mount_.reset();        // unmounts stripefs (kills a daemon) first
    lossy_mount_.reset();  // then the file system under the volume
    lossy_.reset();
  }
  // fio writing `f` in the background (its output to a log outside
  // LossyFs), to be killed.
  void StartFio(const FioFile& f) {
    const std::string cmd = f.Args() + " --do_verify=0 >/dev/null 2>&1";
    fio_pid_ = ::fork();
    if (fio_pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(),
              static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  void KillFio() {
    ASSERT_GT(fio_pid_, 0);
    ::kill(fio_pid_, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(fio_pid_, &status, 0), fio_pid_);
    fio_pid_ = 0;
  }
  void Rounds(int cuts);

  uint64_t seed_ = 0;
  std::unique_ptr<LossyFs> lossy_;
  std::unique_ptr<MountedSession> lossy_mount_;
  std::unique_ptr<FsMount> mount_;
  pid_t fio_pid_ = 0;
};

// After a cut, mounted in process: every earlier fsync'd file verifies,
// the file in flight reads, metadata invariants hold and scrub is clean.
void CheckVolume(FsMount& m, const std::vector<FioFile>& synced,
                 const std::string& in_flight) {
  for (const FioFile& f : synced) {
    EXPECT_EQ(SizeOf(f.path), f.size) << f.path;
    auto run = RunCommand(f.Args() + " --verify_only 2>&1");
    EXPECT_EQ(run.rc, 0) << "fsync'd bytes of " << f.path
                         << " lost or corrupt:\n"
                         << f.Args() << "\n"
                         << run.out;
  }
  auto cat = RunCommand("cat " + in_flight + " > /dev/null 2>&1 || test ! -e " +
                        in_flight);
  EXPECT_EQ(cat.rc, 0) << "the file written at the cut does not read";
  stripefs::testing::CheckInvariants(m.volume().meta());
  RepairOptions ro;
  ro.scrub = true;
  auto rep = Repairer(&m.volume()).Run(ro);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->stripes_failed, 0u) << rep->first_error;
  EXPECT_EQ(rep->stripes_repaired, 0u)
      << "scrub rebuilt " << rep->chunks_rebuilt << " chunks of committed "
      << "stripes: a chunk of a committed stripe was lost in the cut";
  std::printf("  scrub: %llu stripes clean, %llu orphan chunks\n",
              static_cast<unsigned long long>(rep->stripes_seen),
              static_cast<unsigned long long>(rep->orphan_chunks));
}

void MountPowerCutTest::Rounds(int cuts) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  std::mt19937_64 rng(seed_);
  FsMountOptions o;
  // The volume makes its own directory: that it survives is checked too.
  o.volume_dir = lossy_mount_->Path("vol");
  auto m = FsMount::Start(o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  mount_ = std::move(*m);
  std::vector<FioFile> synced;
  for (int round = 0; round < cuts; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Status st = mount_->StartDaemon();
    ASSERT_TRUE(st.ok()) << st.ToString();
    FioFile a = RandomFile(mount_->Path("a" + std::to_string(round)), rng, 4);
    auto run = RunCommand(a.Args() + " --do_verify=0 2>&1");
    ASSERT_EQ(run.rc, 0) << a.Args() << "\n" << run.out;
    synced.push_back(a);
    FioFile b = RandomFile(mount_->Path("b" + std::to_string(round)), rng, 32);
    const auto kill_after = std::chrono::milliseconds(rng() % 800);
    StartFio(b);
    std::this_thread::sleep_for(kill_after);
    KillFio();
    st = mount_->KillDaemon();
    ASSERT_TRUE(st.ok()) << st.ToString();
    CutReport cut = lossy_->PowerCut(true);
    std::printf(
        "round %d: %s (%llu B, bs %llu, fsync every %d) synced; cut %lld ms "
        "into %s: %llu inodes vanished, torn %d (kept %llu of %llu bytes)\n",
        round, a.path.c_str(), static_cast<unsigned long long>(a.size),
        static_cast<unsigned long long>(a.bs), a.fsync_every,
        static_cast<long long>(kill_after.count()), b.path.c_str(),
        static_cast<unsigned long long>(cut.vanished_inodes), cut.torn ? 1 : 0,
        static_cast<unsigned long long>(cut.kept),
        static_cast<unsigned long long>(cut.length));
    st = mount_->Remount();
    ASSERT_TRUE(st.ok()) << "the volume does not mount after the cut: "
                         << st.ToString();
    CheckVolume(*mount_, synced, b.path);
    if (HasFailure()) return;
  }
  EXPECT_EQ(lossy_->cuts(), static_cast<uint64_t>(cuts));
}

TEST_F(MountPowerCutTest, FsyncedBytesSurviveEachCut) {
  const char* soak = std::getenv("STRIPEFS_SOAK");
  Rounds(soak && std::string(soak) == "1" ? 20 : 3);
}

}  // namespace
}  // namespace stripefs::lossyfs
