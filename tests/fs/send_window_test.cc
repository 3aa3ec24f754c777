// The default stripe send windows follow the stripe size (ResolveSendWindows),
// explicit ones are kept, and a mount's StripeFs reports the windows it
// runs with.
#include <gtest/gtest.h>

#include <memory>

#include "fs/stripe_fs.h"
#include "tests/support/in_process_volume.h"

namespace stripefs::fs {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(SendWindowTest, DefaultsFollowTheStripeSize) {
  const StripeFsOptions d;
  auto w = [&](uint64_t stripe) {
    const StripeFsOptions o = ResolveSendWindows(d, stripe);
    return std::make_pair(o.send_window, o.file_send_window);
  };
  EXPECT_EQ(w(kMiB), std::make_pair(size_t{32}, size_t{16}));
  EXPECT_EQ(w(4 * kMiB), std::make_pair(size_t{16}, size_t{8}));
  EXPECT_EQ(w(64 * kMiB), std::make_pair(size_t{16}, size_t{8}));
  EXPECT_EQ(w(256 << 10), std::make_pair(size_t{64}, size_t{32}));
  EXPECT_EQ(w(16 << 10), std::make_pair(size_t{64}, size_t{32}));
}

TEST(SendWindowTest, ExplicitWindowsAreKept) {
  StripeFsOptions o;
  o.send_window = 4;
  StripeFsOptions r = ResolveSendWindows(o, kMiB);
  EXPECT_EQ(r.send_window, 4u);
  EXPECT_EQ(r.file_send_window, 4u);  // never more than the mount's
  o.send_window = 0;                  // sends inside the WRITE
  r = ResolveSendWindows(o, kMiB);
  EXPECT_EQ(r.send_window, 0u);
  EXPECT_EQ(r.file_send_window, 8u);
  o.send_window = 100;
  o.file_send_window = 3;
  r = ResolveSendWindows(o, 4 * kMiB);
  EXPECT_EQ(r.send_window, 100u);
  EXPECT_EQ(r.file_send_window, 3u);
}

TEST(SendWindowTest, StatsShowTheWindowsInUse) {
  stripefs::testing::InProcessVolumeOptions vo;
  vo.servers = 6;
  vo.geometry = Geometry{4, 2, 256 << 10};  // 1 MiB stripes
  auto v = stripefs::testing::InProcessVolume::Open(vo);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  StripeFsOptions fo;
  fo.purge_orphans_at_start = false;
  auto fs = std::make_unique<StripeFs>(&(*v)->volume(), fo);
  const auto j = fs->StatsJson();
  EXPECT_EQ(j["coalescing"]["send_window"], 32);
  EXPECT_EQ(j["coalescing"]["file_send_window"], 16);
}

}  // namespace
}  // namespace stripefs::fs
