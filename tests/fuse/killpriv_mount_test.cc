// FUSE_HANDLE_KILLPRIV_V2 through a real mount of MemFs: with it the kernel
// stops sending GETXATTR(security.capability) before every write(), and the
// kill flags it sends instead clear set-user-ID and set-group-ID (checks in
// tests/support/killpriv_checks.h, shared with the StripeFs mount test).
// Counts come from the engine's per-opcode counters. Skips loudly without
// root or /dev/fuse.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/fuse/mem_fs.h"
#include "tests/fuse/mounted_session.h"
#include "tests/support/killpriv_checks.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using testing::MemFs;
using testing::MountedSession;
namespace support = stripefs::testing;

constexpr int kWrites = 512;

class KillprivMount : public ::testing::Test {
 protected:
  void Mount(bool killpriv_v2) {
    std::string why = testing::MountSkipReason();
    if (!why.empty()) GTEST_SKIP() << "SKIPPED (loudly): " << why;
    fs_ = std::make_unique<MemFs>();
    SessionOptions o;
    o.transport = TransportChoice::kDev;
    o.init.handle_killpriv_v2 = killpriv_v2;
    MountOptions mo;
    mo.allow_other = true;  // the unprivileged writer
    auto m = MountedSession::Start(fs_.get(), o, mo);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    m_ = std::move(*m);
  }
  void TearDown() override {
    m_.reset();  // unmounts, also after a failed assertion
    fs_.reset();
  }
  support::ProbeCount Probes() {
    return support::CapabilityProbesDuringWrites(
        m_->Path("f"), kWrites,
        [this](uint32_t op) { return m_->session().Stats().per_opcode[op]; });
  }

  std::unique_ptr<MemFs> fs_;
  std::unique_ptr<MountedSession> m_;
};

TEST_F(KillprivMount, WithoutV2EveryWriteCostsACapabilityProbe) {
  Mount(/*killpriv_v2=*/false);
  if (HasFatalFailure() || IsSkipped()) return;
  EXPECT_FALSE(m_->session().negotiated().Has(FUSE_HANDLE_KILLPRIV_V2));
  auto p = Probes();
  EXPECT_GE(p.getxattr, static_cast<uint64_t>(kWrites)) << p.attr_replies;
}

TEST_F(KillprivMount, WithV2WritesSendNoCapabilityProbe) {
  Mount(/*killpriv_v2=*/true);
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(m_->session().negotiated().Has(FUSE_HANDLE_KILLPRIV_V2))
      << "kernel did not accept FUSE_HANDLE_KILLPRIV_V2";
  auto p = Probes();
  // One probe latches S_NOSEC; only an attribute reply re-arms it.
  EXPECT_LE(p.getxattr, 1 + p.attr_replies);
  EXPECT_LT(p.getxattr, static_cast<uint64_t>(kWrites));
  std::printf("killpriv v2: %llu GETXATTR for %d writes (%llu attr replies)\n",
              static_cast<unsigned long long>(p.getxattr), kWrites,
              static_cast<unsigned long long>(p.attr_replies));
}

TEST_F(KillprivMount, FlaggedWriteTruncateAndChownDropPrivileges) {
  Mount(/*killpriv_v2=*/true);
  if (HasFatalFailure() || IsSkipped()) return;
  support::ExpectKillprivV2Contract(m_->dir());
}

}  // namespace
}  // namespace stripefs::fuse
