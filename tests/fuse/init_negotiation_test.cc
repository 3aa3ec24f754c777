// NegotiateInit as a pure function: flags asked for vs offered, limits,
// the opt-alignment byte, killpriv v2, io-uring and the major-version
// refusal. No Session, no kernel.
#include "fuse/init_negotiation.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "tests/fuse/wire_builder.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using testing::KernelInit;

fuse_init_out Out(const InitNegotiation& n) {
  fuse_init_out out;
  std::memcpy(&out, n.reply.data(), sizeof(out));
  return out;
}

TEST(NegotiateInit, GrantsOnlyWhatWasOfferedAndReportsBoth) {
  InitConfig c;
  c.init.posix_acl = true;  // asked, not offered below
  uint64_t offered = FUSE_ASYNC_READ | FUSE_WRITEBACK_CACHE | FUSE_MAX_PAGES;
  auto n = NegotiateInit(KernelInit(45, offered), c);
  ASSERT_EQ(n.error, 0);
  EXPECT_TRUE(n.report.Has(FUSE_WRITEBACK_CACHE));
  EXPECT_TRUE(n.report.Has(FUSE_ASYNC_READ));
  EXPECT_FALSE(n.report.Has(FUSE_POSIX_ACL));
  EXPECT_TRUE(n.report.requested_flags & FUSE_POSIX_ACL);
  EXPECT_EQ(n.report.offered_flags, offered | FUSE_INIT_EXT);
  auto out = Out(n);
  EXPECT_EQ(out.major, 7u);
  EXPECT_EQ(out.minor, kKernelMinorVersion);
  EXPECT_EQ(out.flags & FUSE_POSIX_ACL, 0u);
  EXPECT_NE(out.flags & FUSE_WRITEBACK_CACHE, 0u);
}

TEST(NegotiateInit, PosixAclBringsSetxattrExtAndDontMaskIsSeparate) {
  InitConfig c;
  const uint64_t offered = FUSE_POSIX_ACL | FUSE_SETXATTR_EXT | FUSE_DONT_MASK;
  auto off = NegotiateInit(KernelInit(45, offered), c);
  EXPECT_EQ(off.report.flags & offered, 0u);  // none by default
  c.init.posix_acl = true;
  auto acl = NegotiateInit(KernelInit(45, offered), c);
  EXPECT_TRUE(acl.report.Has(FUSE_POSIX_ACL));
  EXPECT_TRUE(acl.report.Has(FUSE_SETXATTR_EXT));  // carries ACL_KILL_SGID
  EXPECT_FALSE(acl.report.Has(FUSE_DONT_MASK));
  c.init.dont_mask = true;
  auto both = NegotiateInit(KernelInit(45, offered), c);
  EXPECT_TRUE(both.report.Has(FUSE_DONT_MASK));
  EXPECT_NE(Out(both).flags & FUSE_DONT_MASK, 0u);
  EXPECT_NE(Out(both).flags & FUSE_POSIX_ACL, 0u);
}

TEST(NegotiateInit, KillprivV2IsAskedForByDefaultAndCanBeTurnedOff) {
  InitConfig c;
  uint64_t offered = FUSE_HANDLE_KILLPRIV | FUSE_HANDLE_KILLPRIV_V2;
  auto on = NegotiateInit(KernelInit(45, offered), c);
  EXPECT_TRUE(on.report.Has(FUSE_HANDLE_KILLPRIV_V2));
  EXPECT_FALSE(on.report.Has(FUSE_HANDLE_KILLPRIV));  // v1 stays off
  EXPECT_NE(Out(on).flags & FUSE_HANDLE_KILLPRIV_V2, 0u);
  c.init.handle_killpriv_v2 = false;
  auto off = NegotiateInit(KernelInit(45, offered), c);
  EXPECT_FALSE(off.report.Has(FUSE_HANDLE_KILLPRIV_V2));
  EXPECT_EQ(Out(off).flags & FUSE_HANDLE_KILLPRIV_V2, 0u);
}

TEST(NegotiateInit, LimitsAreClampedAndMaxPagesReportsTheKernelCap) {
  InitConfig c;
  c.init.max_write = 100;  // below the kernel's 4 KiB floor
  c.init.max_pages = 1024;
  c.init.max_readahead = 1 << 20;
  c.init.time_gran = 0;
  c.max_pages_limit = 256;
  auto n = NegotiateInit(KernelInit(45, FUSE_MAX_PAGES), c);
  EXPECT_EQ(n.report.max_write, 4096u);
  EXPECT_EQ(n.report.max_pages, 256u);             // what the kernel will use
  EXPECT_EQ(Out(n).max_pages, 1024u);              // what we asked for
  EXPECT_EQ(n.report.max_readahead, 128u * 1024);  // kernel's is smaller
  EXPECT_EQ(n.report.time_gran, 1u);
}

TEST(NegotiateInit, AlignmentByteFollowsTheKernelMinor) {
  InitConfig c;
  c.init.align_page_order = 20;
  auto n45 = NegotiateInit(KernelInit(45, 0), c);
  EXPECT_EQ(n45.report.align_offset, 42u);
  EXPECT_EQ(n45.reply[42], 20);
  EXPECT_EQ(n45.reply[40], 0);
  EXPECT_FALSE(n45.report.align_acknowledged);
  EXPECT_NE(Out(n45).flags2 & (FUSE_ALIGN_PG_ORDER >> 32), 0u);

  auto n40 = NegotiateInit(KernelInit(40, FUSE_ALIGN_PG_ORDER), c);
  EXPECT_EQ(n40.report.align_offset, 40u);
  EXPECT_EQ(n40.reply[40], 20);
  EXPECT_TRUE(n40.report.align_acknowledged);

  c.init.align_page_order = 0;
  auto none = NegotiateInit(KernelInit(45, FUSE_ALIGN_PG_ORDER), c);
  EXPECT_FALSE(none.report.align_requested);
  EXPECT_EQ(Out(none).flags2 & (FUSE_ALIGN_PG_ORDER >> 32), 0u);
}

// The distribution kernel lines (kernel/lines) carry the same ABI: bit 50
// offered in init_in, the byte at the offset the minor picks. Debian 12's 6.1
// speaks 7.38, Debian 13's 6.12 7.41: both read the byte at 40, which is
// unused there (6.12's max_stack_depth ends at 40), so no per-line code.
TEST(NegotiateInit, KernelLinesGetTheByteAt40AndAnAcknowledgement) {
  InitConfig c;
  c.init.align_page_order = 20;
  for (uint32_t minor : {38u, 41u}) {
    auto n = NegotiateInit(KernelInit(minor, FUSE_ALIGN_PG_ORDER), c);
    ASSERT_EQ(n.error, 0) << minor;
    EXPECT_EQ(n.report.align_offset, 40u) << minor;
    EXPECT_EQ(n.reply[40], 20) << minor;
    EXPECT_EQ(n.reply[42], 0) << minor;
    EXPECT_TRUE(n.report.align_acknowledged) << minor;
    EXPECT_EQ(Out(n).max_stack_depth, 0u) << minor;
    EXPECT_NE(Out(n).flags2 & (FUSE_ALIGN_PG_ORDER >> 32), 0u) << minor;
  }
}

TEST(NegotiateInit, UringOnlyWhenTheTransportWantsIt) {
  InitConfig c;
  auto dev = NegotiateInit(KernelInit(45, FUSE_OVER_IO_URING), c);
  EXPECT_TRUE(dev.report.uring_offered);
  EXPECT_FALSE(dev.report.uring_requested);
  EXPECT_FALSE(dev.report.Has(FUSE_OVER_IO_URING));
  c.want_uring = true;
  auto ring = NegotiateInit(KernelInit(45, FUSE_OVER_IO_URING), c);
  EXPECT_TRUE(ring.report.Has(FUSE_OVER_IO_URING));
  auto not_offered = NegotiateInit(KernelInit(45, 0), c);
  EXPECT_TRUE(not_offered.report.uring_requested);
  EXPECT_FALSE(not_offered.report.Has(FUSE_OVER_IO_URING));
}

TEST(NegotiateInit, OldKernelWithoutInitExtHasNoHighFlags) {
  fuse_init_in in{};
  in.major = 7;
  in.minor = 31;
  in.flags = static_cast<uint32_t>(FUSE_MAX_PAGES);
  in.flags2 = 0xffffffff;  // garbage without FUSE_INIT_EXT: ignored
  auto n = NegotiateInit(in, InitConfig{});
  ASSERT_EQ(n.error, 0);
  EXPECT_EQ(n.report.offered_flags >> 32, 0u);
  EXPECT_EQ(n.report.minor, 31u);
}

TEST(NegotiateInit, OtherMajorIsRefusedWithAReason) {
  fuse_init_in in = KernelInit(45, 0);
  in.major = 8;
  auto n = NegotiateInit(in, InitConfig{});
  EXPECT_EQ(n.error, EPROTO);
  EXPECT_NE(n.refusal.find("major 8"), std::string::npos) << n.refusal;
}

}  // namespace
}  // namespace stripefs::fuse
