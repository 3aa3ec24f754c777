// AtimeTracker: the VFS's atime rules and the batching of updates.
#include "fs/atime_tracker.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace stripefs::fs {
namespace {

InodeAttr File(uint64_t ino, Timespec atime, Timespec mtime, Timespec ctime) {
  InodeAttr a;
  a.ino = ino;
  a.mode = S_IFREG | 0644;
  a.atime = atime;
  a.mtime = mtime;
  a.ctime = ctime;
  return a;
}

constexpr int64_t kDay = 24 * 60 * 60;

TEST(AtimeNeedsUpdate, RelatimeIsTheVfsRule) {
  const Timespec now{1000000, 5};
  // atime not after mtime (or ctime): update.
  EXPECT_TRUE(AtimeNeedsUpdate(AtimeMode::kRelatime,
                               File(1, {100, 0}, {100, 0}, {50, 0}), now));
  EXPECT_TRUE(AtimeNeedsUpdate(AtimeMode::kRelatime,
                               File(1, {100, 0}, {50, 0}, {100, 1}), now));
  // After both and younger than a day: no update.
  EXPECT_FALSE(AtimeNeedsUpdate(
      AtimeMode::kRelatime, File(1, {now.sec - 10, 0}, {50, 0}, {50, 0}), now));
  // A day old: update.
  EXPECT_TRUE(AtimeNeedsUpdate(AtimeMode::kRelatime,
                               File(1, {now.sec - kDay, 0}, {50, 0}, {50, 0}),
                               now));
  EXPECT_TRUE(AtimeNeedsUpdate(AtimeMode::kStrictatime,
                               File(1, {now.sec - 1, 0}, {50, 0}, {50, 0}),
                               now));
  EXPECT_FALSE(AtimeNeedsUpdate(AtimeMode::kNoatime,
                                File(1, {1, 0}, {50, 0}, {50, 0}), now));
}

TEST(AtimeTracker, PendingUntilTakenAndShownMeanwhile) {
  AtimeTracker t({});
  const InodeAttr a = File(7, {100, 0}, {200, 0}, {200, 0});
  EXPECT_TRUE(t.Access(a, {300, 1}));
  EXPECT_EQ(t.pending(), 1u);
  // The second access sees the pending atime: after mtime, no update.
  EXPECT_FALSE(t.Access(a, {301, 0}));
  InodeAttr shown = a;
  t.Apply(&shown);
  EXPECT_EQ(shown.atime, (Timespec{300, 1}));
  EXPECT_EQ(t.Take(7), (Timespec{300, 1}));
  EXPECT_EQ(t.Take(7), std::nullopt);
  EXPECT_EQ(t.pending(), 0u);
  // Written: still known, so a stale cached copy updates nothing.
  EXPECT_FALSE(t.Access(a, {302, 0}));
  // A write after it: updates again.
  EXPECT_TRUE(t.Access(File(7, {100, 0}, {400, 0}, {400, 0}), {401, 0}));
  auto all = t.TakeAll();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].second, (Timespec{401, 0}));
  t.Restore(7, {401, 0});
  EXPECT_EQ(t.pending(), 1u);
  t.Forget(7);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(AtimeTracker, NoatimeNodiratimeAndReadOnlyNeverUpdate) {
  const InodeAttr f = File(1, {1, 0}, {2, 0}, {2, 0});
  InodeAttr d = f;
  d.mode = S_IFDIR | 0755;
  EXPECT_FALSE(AtimeTracker({AtimeMode::kNoatime}).Access(f, {3, 0}));
  AtimeTracker nodir({AtimeMode::kRelatime, /*nodiratime=*/true});
  EXPECT_FALSE(nodir.Access(d, {3, 0}));
  EXPECT_TRUE(nodir.Access(f, {3, 0}));
  AtimeOptions ro;
  ro.read_only = true;
  EXPECT_FALSE(AtimeTracker(ro).Access(f, {3, 0}));
}

TEST(AtimeOptionsFrom, LastAtimeOptionWins) {
  EXPECT_EQ(AtimeOptionsFrom({}).mode, AtimeMode::kRelatime);
  EXPECT_EQ(AtimeOptionsFrom({"noatime"}).mode, AtimeMode::kNoatime);
  EXPECT_EQ(AtimeOptionsFrom({"nosuid,strictatime,lazytime"}).mode,
            AtimeMode::kStrictatime);
  EXPECT_TRUE(AtimeOptionsFrom({"nosuid,strictatime,lazytime"}).lazytime);
  EXPECT_EQ(AtimeOptionsFrom({"noatime", "relatime"}).mode,
            AtimeMode::kRelatime);
  EXPECT_TRUE(AtimeOptionsFrom({"ro,nodiratime"}).read_only);
  EXPECT_TRUE(AtimeOptionsFrom({"ro,nodiratime"}).nodiratime);
  AtimeOptions base;
  base.mode = AtimeMode::kNoatime;
  EXPECT_EQ(AtimeOptionsFrom({"nosuid"}, base).mode, AtimeMode::kNoatime);
}

}  // namespace
}  // namespace stripefs::fs
