// Session logic without a kernel: INIT negotiation bytes, dispatch,
// errors, counters and INTERRUPT, driven through DispatchDevBuffer.
#include "fuse/session.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "fuse/engine_stats_json.h"
#include "tests/fuse/wire_builder.h"
#include "tests/support/fake_inflight.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using stripefs::testing::FakeInFlight;
using stripefs::testing::RecordedReply;
using testing::KernelInit;
using testing::WireRequest;

class HoldingFs : public RawFileSystem {
 public:
  void Init(const NegotiatedInit& n) override { neg = n; }
  void Lookup(Replier r, uint64_t parent, std::string_view name) override {
    last_name = std::string(name);
    last_parent = parent;
    if (name == "hold") {
      held = std::make_unique<Replier>(std::move(r));
      return;
    }
    fuse_entry_out e{};
    e.nodeid = 2;
    r.Entry(e);
  }
  void Write(Replier r, uint64_t, const WriteRequest& w) override {
    writeback = w.is_writeback();
    r.Written(w.size());
  }
  void Forget(uint64_t nodeid, uint64_t n) override { forgot += nodeid * n; }
  void Interrupt(uint64_t unique) override { interrupted_unique = unique; }
  NegotiatedInit neg;
  std::string last_name;
  uint64_t last_parent = 0;
  std::unique_ptr<Replier> held;
  bool writeback = false;
  uint64_t forgot = 0;
  uint64_t interrupted_unique = 0;
};

class SessionTest : public ::testing::Test {
 protected:
  RecordedReply Send(const std::vector<uint8_t>& buf) {
    RecordedReply rec;
    auto* f = new FakeInFlight(&rec, /*delete_on_complete=*/true);
    session->DispatchDevBuffer(f, buf);
    return rec;
  }
  fuse_init_out DoInit(uint32_t minor, uint64_t offered, std::string* raw) {
    auto rec = Send(WireRequest(FUSE_INIT, 1, 0)
                        .Struct(KernelInit(minor, offered))
                        .Build());
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, 0);
    EXPECT_EQ(rec.body.size(), sizeof(fuse_init_out));
    fuse_init_out out{};
    std::memcpy(&out, rec.body.data(), std::min(rec.body.size(), sizeof(out)));
    if (raw) *raw = rec.body;
    return out;
  }
  void Make(SessionOptions o) { session = std::make_unique<Session>(&fs, o); }

  HoldingFs fs;
  std::unique_ptr<Session> session;
};

SessionOptions DevOptions() {
  SessionOptions o;
  o.transport = TransportChoice::kDev;
  o.init.align_page_order = 20;
  o.init.max_pages = 256;
  o.init.max_write = 1 << 20;
  return o;
}

TEST_F(SessionTest, InitPutsAlignByteAtOffset42OnNewKernels) {
  Make(DevOptions());
  uint64_t offered = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_WRITEBACK_CACHE |
                     FUSE_MAX_PAGES | FUSE_PARALLEL_DIROPS | FUSE_OVER_IO_URING;
  std::string raw;
  auto out = DoInit(45, offered, &raw);
  EXPECT_EQ(out.major, 7u);
  EXPECT_EQ(out.minor, 45u);
  EXPECT_EQ(static_cast<uint8_t>(raw[42]), 20);
  EXPECT_EQ(out.request_timeout, 0u);            // offset 40 untouched
  EXPECT_EQ(out.flags2 & (1u << 18), 1u << 18);  // FUSE_ALIGN_PG_ORDER
  EXPECT_TRUE(out.flags & FUSE_WRITEBACK_CACHE);
  EXPECT_TRUE(out.flags & FUSE_MAX_PAGES);
  EXPECT_TRUE(out.flags & FUSE_INIT_EXT);
  EXPECT_FALSE(out.flags & FUSE_POSIX_ACL);
  // kDev never asks for io-uring even when offered.
  EXPECT_EQ(out.flags2 & (FUSE_OVER_IO_URING >> 32), 0u);
  EXPECT_EQ(out.max_write, 1u << 20);
  EXPECT_EQ(out.max_pages, 256u);
  EXPECT_LE(out.max_readahead, 128u * 1024);
  auto n = session->negotiated();
  EXPECT_TRUE(n.align_requested);
  EXPECT_FALSE(n.align_acknowledged);  // not offered
  EXPECT_EQ(n.align_offset, 42u);
  EXPECT_TRUE(n.uring_offered);
  EXPECT_TRUE(session->initialized());
  EXPECT_EQ(fs.neg.kernel_minor, 45u);
}

TEST_F(SessionTest, InitUsesOffset40ForDdnStyleKernelsAndAcknowledges) {
  Make(DevOptions());
  std::string raw;
  auto out = DoInit(40, FUSE_MAX_PAGES | FUSE_ALIGN_PG_ORDER, &raw);
  EXPECT_EQ(static_cast<uint8_t>(raw[40]), 20);
  EXPECT_EQ(static_cast<uint8_t>(raw[42]), 0);
  EXPECT_EQ(out.flags2 & (1u << 18), 1u << 18);
  auto n = session->negotiated();
  EXPECT_TRUE(n.align_acknowledged);
  EXPECT_EQ(n.align_offset, 40u);
}

TEST_F(SessionTest, NoAlignmentRequestedLeavesFieldsZero) {
  auto o = DevOptions();
  o.init.align_page_order = 0;
  Make(o);
  std::string raw;
  auto out = DoInit(45, FUSE_MAX_PAGES, &raw);
  EXPECT_EQ(out.flags2 & (1u << 18), 0u);
  EXPECT_EQ(raw[40], 0);
  EXPECT_EQ(raw[42], 0);
  EXPECT_FALSE(session->negotiated().align_requested);
}

TEST_F(SessionTest, DispatchErrorsAndCounters) {
  Make(DevOptions());
  DoInit(45, FUSE_MAX_PAGES, nullptr);
  auto ok = Send(WireRequest(FUSE_LOOKUP, 2, 1).Name("x").Build());
  EXPECT_EQ(ok.error, 0);
  EXPECT_EQ(fs.last_name, "x");
  auto unknown = Send(WireRequest(1000, 3).Build());
  EXPECT_EQ(unknown.error, ENOSYS);
  auto bad = Send(WireRequest(FUSE_LOOKUP, 4).Bytes("nonul").Build());
  EXPECT_EQ(bad.error, EINVAL);
  auto noimpl = Send(WireRequest(FUSE_STATFS, 5).Build());
  EXPECT_EQ(noimpl.error, ENOSYS);  // RawFileSystem default
  auto forget =
      Send(WireRequest(FUSE_FORGET, 6, 9).Struct(fuse_forget_in{2}).Build());
  EXPECT_TRUE(forget.done);
  EXPECT_EQ(forget.error, kNoReply);
  EXPECT_EQ(fs.forgot, 18u);
  fuse_write_in w{};
  w.size = 3;
  w.write_flags = FUSE_WRITE_CACHE;
  auto wr = Send(WireRequest(FUSE_WRITE, 7, 2).Struct(w).Bytes("abc").Build());
  EXPECT_EQ(wr.error, 0);
  EXPECT_TRUE(fs.writeback);
  auto st = session->Stats();
  EXPECT_EQ(st.per_opcode[FUSE_LOOKUP], 1u);
  EXPECT_EQ(st.per_opcode[FUSE_WRITE], 1u);
  EXPECT_EQ(st.unknown_opcode, 1u);
  EXPECT_EQ(st.malformed, 1u);
  ASSERT_FALSE(st.queues.empty());
  EXPECT_EQ(st.queues[0].transport, "dev");
  EXPECT_EQ(st.queues[0].background, 1u);  // the writeback WRITE
  EXPECT_GE(st.queues[0].requests, 7u);
}

TEST_F(SessionTest, RequestsBeforeInitFail) {
  Make(DevOptions());
  auto r = Send(WireRequest(FUSE_LOOKUP, 2, 1).Name("x").Build());
  EXPECT_EQ(r.error, EIO);
}

TEST_F(SessionTest, InterruptMarksTheHeldRequest) {
  Make(DevOptions());
  DoInit(45, FUSE_MAX_PAGES, nullptr);
  RecordedReply held_rec;
  auto* f = new FakeInFlight(&held_rec, true);
  session->DispatchDevBuffer(
      f, WireRequest(FUSE_LOOKUP, 10, 1).Name("hold").Build());
  ASSERT_TRUE(fs.held);
  EXPECT_FALSE(held_rec.done);
  EXPECT_FALSE(fs.held->interrupted());
  auto intr = Send(WireRequest(FUSE_INTERRUPT, 11 | FUSE_INT_REQ_BIT, 0)
                       .Struct(fuse_interrupt_in{10})
                       .Build());
  EXPECT_EQ(intr.error, kNoReply);
  EXPECT_TRUE(fs.held->interrupted());
  EXPECT_EQ(fs.interrupted_unique, 10u);
  fs.held->Error(EINTR);
  EXPECT_TRUE(held_rec.done);
  EXPECT_EQ(held_rec.error, EINTR);
  // Interrupt for a request that is not in flight: EAGAIN (kernel retries
  // or drops it).
  auto again = Send(WireRequest(FUSE_INTERRUPT, 13 | FUSE_INT_REQ_BIT, 0)
                        .Struct(fuse_interrupt_in{10})
                        .Build());
  EXPECT_EQ(again.error, EAGAIN);
}

TEST_F(SessionTest, StatsRenderAsJsonAndText) {
  Make(DevOptions());
  DoInit(45, FUSE_MAX_PAGES | FUSE_WRITEBACK_CACHE, nullptr);
  Send(WireRequest(FUSE_LOOKUP, 2, 1).Name("x").Build());
  auto st = session->Stats();
  auto j = EngineStatsToJson(st);
  EXPECT_EQ(j["transport"], "dev");
  EXPECT_EQ(j["requests_by_opcode"]["LOOKUP"], 1);
  EXPECT_EQ(j["requests_by_opcode"]["INIT"], 1);
  EXPECT_EQ(j["negotiated"]["alignment"]["requested"], true);
  EXPECT_EQ(j["negotiated"]["alignment"]["acknowledged"], false);
  EXPECT_EQ(j["negotiated"]["writeback_cache"], true);
  EXPECT_EQ(j["queues"][0]["requests"], 2);
  std::string text = EngineStatsToText(st);
  EXPECT_NE(text.find("requested (2^20 bytes), not acknowledged"),
            std::string::npos)
      << text;
}

TEST(TransportChoice, ParseAndSelect) {
  EXPECT_EQ(*ParseTransportChoice("auto"), TransportChoice::kAuto);
  EXPECT_EQ(*ParseTransportChoice("dev"), TransportChoice::kDev);
  EXPECT_EQ(*ParseTransportChoice("uring"), TransportChoice::kUring);
  EXPECT_FALSE(ParseTransportChoice("tcp").ok());
  EXPECT_TRUE(ShouldUseUring(TransportChoice::kAuto, true));
  EXPECT_FALSE(ShouldUseUring(TransportChoice::kAuto, false));
  EXPECT_FALSE(ShouldUseUring(TransportChoice::kDev, true));
  EXPECT_TRUE(ShouldUseUring(TransportChoice::kUring, true));
  EXPECT_FALSE(ShouldUseUring(TransportChoice::kUring, false));
}

// --uring-queues N below the CPUs is honoured only when the kernel offered
// FUSE_URING_REDUCED_Q; otherwise the ring would never become ready (stock
// 7.2 hangs every request), so the plan is one queue per CPU and says why.
TEST(UringQueuePlan, ReducedOnlyWhenTheKernelOffersIt) {
  UringQueuePlan p = PlanUringQueues(8, 2, /*reduced_offered=*/false);
  EXPECT_EQ(p.queues, 8);
  EXPECT_EQ(p.message,
            "--uring-queues 2 ignored: this kernel cannot serve fewer io-uring "
            "queues than CPUs (needs the stripefs fuse.ko patch 7); using one "
            "per CPU (8)");
  p = PlanUringQueues(8, 2, /*reduced_offered=*/true);
  EXPECT_EQ(p.queues, 2);
  EXPECT_NE(p.message.find("2 of 8 queues"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("FUSE_URING_REDUCED_Q"), std::string::npos);
  EXPECT_EQ(PlanUringQueues(8, 1, true).queues, 1);
  EXPECT_EQ(PlanUringQueues(8, 7, false).queues, 8);
  EXPECT_EQ(PlanUringQueues(8, 7, true).queues, 7);
  // Not requested, or not fewer than the CPUs: one per CPU, nothing to log,
  // whatever the kernel offered.
  for (bool offered : {false, true}) {
    for (int requested : {0, 8, 9}) {
      p = PlanUringQueues(8, requested, offered);
      EXPECT_EQ(p.queues, 8) << requested << " " << offered;
      EXPECT_TRUE(p.message.empty()) << p.message;
    }
  }
  // One CPU: nothing to reduce.
  p = PlanUringQueues(1, 1, false);
  EXPECT_EQ(p.queues, 1);
  EXPECT_TRUE(p.message.empty());
}

TEST(InitFlagNames, NamesBits) {
  EXPECT_EQ(InitFlagNames(FUSE_ASYNC_READ | FUSE_WRITEBACK_CACHE),
            "ASYNC_READ|WRITEBACK_CACHE");
  EXPECT_EQ(InitFlagNames(FUSE_OVER_IO_URING | FUSE_ALIGN_PG_ORDER),
            "OVER_IO_URING|ALIGN_PG_ORDER");
  EXPECT_EQ(InitFlagNames(FUSE_HAS_COMPOUND | FUSE_URING_REDUCED_Q),
            "HAS_COMPOUND|URING_REDUCED_Q");
}

}  // namespace
}  // namespace stripefs::fuse
