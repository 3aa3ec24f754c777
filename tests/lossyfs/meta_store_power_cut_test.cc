// MetaStore (metad's RocksDB) across power cuts: the crash rounds of
// MetaStoreCrash (tests/meta/meta_crash_rounds.h: meta_crash_child mutates
// the namespace and stripe map and is killed at random points) with the
// store on LossyFs and a power cut (dropping every unsynced write and
// directory change, tearing the last write at a sector boundary) after each
// kill: the store reopens with every invariant intact and every
// acknowledged change present. Every mutation is synced before it is
// acknowledged in the first test (namespace_sync_delay 0, the embedded
// volume's setting). The others run metad's lazy window
// (--namespace-sync-ms: 5, the default, and 200): the child does namespace
// work only and calls Sync() now and then; after each cut the changes that
// survived are a prefix of those acknowledged, including every one
// acknowledged before the last Sync() (CheckLazyWindow). The seed is
// printed; LOSSYFS_SEED=<n> replays the tear choices (the kill points are
// timed).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "tests/fuse/mounted_session.h"
#include "tests/lossyfs/lossy_fs.h"
#include "tests/meta/meta_crash_rounds.h"

namespace stripefs::lossyfs {
namespace {

using fuse::testing::MountedSession;

void PowerCutRounds(const char* lazy_ms) {
  std::string why = fuse::testing::MountSkipReason();
  if (!why.empty()) GTEST_SKIP() << "lossyfs needs a real mount: " << why;
  const char* env = std::getenv("LOSSYFS_SEED");
  const uint64_t seed =
      env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf(
      "metastore power cuts, namespace sync window %s ms: seed %llu (replay: "
      "LOSSYFS_SEED=%llu)\n",
      lazy_ms, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  LossyFs fs(seed);
  fuse::MountOptions mo;
  mo.fsname = mo.subtype = "lossyfs";
  auto m = MountedSession::Start(&fs, LossyFs::SessionOptionsForLossyFs(), mo);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::unique_ptr<MountedSession> mount = std::move(*m);
  // MetaStore::Create makes the store's directory itself: a cut right after
  // it must not lose the store (it did before MakeDirsDurably).
  // The acknowledgements live outside LossyFs: the cut must not touch them.
  stripefs::testing::TempDir acks;
  int round = 0;
  const bool lazy = std::string(lazy_ms) != "0";
  stripefs::testing::CrashRounds(
      10, lazy_ms, static_cast<uint32_t>(seed),
      stripefs::testing::CrashRoundsSetup{
          META_CRASH_CHILD, mount->Path("meta"), acks.sub("acks"),
          [&] {
            CutReport cut = fs.PowerCut(true);
            std::printf(
                "round %d: cut: %llu inodes vanished, torn %d (kept "
                "%llu of %llu bytes)\n",
                round++, static_cast<unsigned long long>(cut.vanished_inodes),
                cut.torn ? 1 : 0, static_cast<unsigned long long>(cut.kept),
                static_cast<unsigned long long>(cut.length));
          },
          lazy});
  EXPECT_EQ(fs.cuts(), 10u);
}

TEST(MetaStorePowerCutTest, AcknowledgedMutationsSurviveEachCut) {
  PowerCutRounds("0");
}

TEST(MetaStorePowerCutTest, LazyWindowLosesOnlyASuffixAfterTheLastSync) {
  PowerCutRounds("5");  // metad's default --namespace-sync-ms
}

TEST(MetaStorePowerCutTest, WideLazyWindowLosesOnlyASuffixAfterTheLastSync) {
  PowerCutRounds("200");
}

}  // namespace
}  // namespace stripefs::lossyfs
