// FUSE_COMPOUND: the decoder refuses every malformed shape with EINVAL
// (count 0, count > 16, truncated or overlong sub-requests, nested compounds,
// opcodes that are not answered once), the reply encoder's layout, and the
// Session serving OPEN+GETATTR through the normal handlers, also when a
// sub-reply comes later, and refusing with ENOSYS when told to.
#include "fuse/compound.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "fuse/session.h"
#include "tests/fuse/wire_builder.h"
#include "tests/support/fake_inflight.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using stripefs::testing::FakeInFlight;
using stripefs::testing::RecordedReply;
using testing::KernelInit;
using testing::WireRequest;

std::vector<uint8_t> OpenSub(uint64_t unique, uint64_t node) {
  fuse_open_in in{};
  in.flags = 2;  // O_RDWR
  return WireRequest(FUSE_OPEN, unique, node).Struct(in).Build();
}
std::vector<uint8_t> GetAttrSub(uint64_t unique, uint64_t node) {
  return WireRequest(FUSE_GETATTR, unique, node)
      .Struct(fuse_getattr_in{})
      .Build();
}

fuse_compound_in Header(uint32_t count) {
  fuse_compound_in h{};
  h.count = count;
  return h;
}

std::vector<uint8_t> Concat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::span<const uint8_t> Bytes(const fuse_compound_in& h) {
  return {reinterpret_cast<const uint8_t*>(&h), sizeof(h)};
}

CompoundDecode Decode(uint32_t count, const std::vector<uint8_t>& subs) {
  fuse_compound_in h = Header(count);
  return DecodeCompound(Bytes(h), subs, ParseOptions{});
}

TEST(CompoundDecode, OpenPlusGetattr) {
  auto d = Decode(2, Concat({OpenSub(0, 5), GetAttrSub(1, 5)}));
  ASSERT_EQ(d.error, 0) << d.reason;
  ASSERT_EQ(d.subs.size(), 2u);
  EXPECT_EQ(d.subs[0].header.opcode, FUSE_OPEN);
  EXPECT_EQ(d.subs[0].header.nodeid, 5u);
  EXPECT_EQ(d.subs[0].arg0.size(), sizeof(fuse_open_in));
  EXPECT_TRUE(d.subs[0].rest.empty());
  EXPECT_EQ(d.subs[1].header.opcode, FUSE_GETATTR);
  EXPECT_EQ(d.subs[1].header.unique, 1u);
  EXPECT_EQ(d.subs[1].arg0.size(), sizeof(fuse_getattr_in));
}

TEST(CompoundDecode, SixteenAllowedSeventeenNot) {
  std::vector<uint8_t> subs;
  for (int i = 0; i < 17; ++i) {
    auto s = GetAttrSub(i, 1);
    subs.insert(subs.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> sixteen(subs.begin(),
                               subs.begin() + 16 * GetAttrSub(0, 1).size());
  EXPECT_EQ(Decode(16, sixteen).error, 0);
  auto d = Decode(17, subs);
  EXPECT_EQ(d.error, EINVAL);
  EXPECT_NE(d.reason.find("exceeds 16"), std::string::npos) << d.reason;
}

TEST(CompoundDecode, CountZeroIsRefused) {
  auto d = Decode(0, {});
  EXPECT_EQ(d.error, EINVAL);
  EXPECT_NE(d.reason.find("count 0"), std::string::npos) << d.reason;
}

TEST(CompoundDecode, TruncatedSubRequestIsRefused) {
  auto full = Concat({OpenSub(0, 5), GetAttrSub(1, 5)});
  // Every cut short of the full length is refused, none reads past it.
  for (size_t cut = 0; cut < full.size(); ++cut) {
    std::vector<uint8_t> part(full.begin(), full.begin() + cut);
    auto d = Decode(2, part);
    EXPECT_EQ(d.error, EINVAL) << "cut at " << cut;
  }
  // Count says 3, only 2 are there.
  EXPECT_EQ(Decode(3, full).error, EINVAL);
}

TEST(CompoundDecode, LengthsMustAddUp) {
  auto open = OpenSub(0, 5);
  // Trailing bytes after the last sub-request.
  auto extra = Concat({open, {0, 0, 0, 0}});
  EXPECT_EQ(Decode(1, extra).error, EINVAL);
  // A sub-request whose len is below the header size.
  auto shortlen = open;
  uint32_t len = 8;
  std::memcpy(shortlen.data(), &len, sizeof(len));
  EXPECT_EQ(Decode(1, shortlen).error, EINVAL);
  // OPEN whose len leaves out part of its fixed struct.
  auto cut = open;
  len = static_cast<uint32_t>(sizeof(fuse_in_header) + 4);
  std::memcpy(cut.data(), &len, sizeof(len));
  cut.resize(len);
  EXPECT_EQ(Decode(1, cut).error, EINVAL);
  // Header of the wrong size.
  fuse_compound_in h = Header(1);
  EXPECT_EQ(DecodeCompound(Bytes(h).first(8), open, ParseOptions{}).error,
            EINVAL);
}

TEST(CompoundDecode, NestedCompoundAndEngineOpcodesAreRefused) {
  fuse_compound_in inner = Header(1);
  auto nested = WireRequest(FUSE_COMPOUND, 0, 1)
                    .Struct(inner)
                    .Bytes(std::string(
                        reinterpret_cast<const char*>(GetAttrSub(0, 1).data()),
                        GetAttrSub(0, 1).size()))
                    .Build();
  auto d = Decode(1, nested);
  EXPECT_EQ(d.error, EINVAL);
  EXPECT_NE(d.reason.find("COMPOUND"), std::string::npos) << d.reason;
  EXPECT_EQ(
      Decode(1, WireRequest(FUSE_FORGET, 0, 1).Struct(fuse_forget_in{1}).Build())
          .error,
      EINVAL);
  EXPECT_EQ(Decode(1, WireRequest(FUSE_INIT, 0, 0)
                          .Struct(KernelInit(45, 0))
                          .Build())
                .error,
            EINVAL);
  EXPECT_EQ(Decode(1, WireRequest(FUSE_DESTROY, 0, 0).Build()).error, EINVAL);
  EXPECT_EQ(Decode(1, WireRequest(FUSE_INTERRUPT, 0, 0)
                          .Struct(fuse_interrupt_in{4})
                          .Build())
                .error,
            EINVAL);
  EXPECT_EQ(Decode(1, WireRequest(4242, 0, 0).Build()).error, EINVAL);
  EXPECT_FALSE(AllowedInCompound(FUSE_COMPOUND));
  EXPECT_FALSE(AllowedInCompound(FUSE_BATCH_FORGET));
  EXPECT_TRUE(AllowedInCompound(FUSE_OPEN));
  EXPECT_TRUE(AllowedInCompound(FUSE_GETATTR));
}

TEST(CompoundReply, Layout) {
  CompoundSubReply a;
  a.unique = 0;
  a.payload = {1, 2, 3};
  CompoundSubReply b;
  b.unique = 1;
  b.error = ENOENT;
  std::vector<CompoundSubReply> subs;
  subs.push_back(a);
  subs.push_back(b);
  auto out = EncodeCompoundReply(subs);
  ASSERT_EQ(out.size(), sizeof(fuse_compound_out) + 16 + 3 + 16);
  fuse_compound_out co;
  std::memcpy(&co, out.data(), sizeof(co));
  EXPECT_EQ(co.count, 2u);
  fuse_out_header h0, h1;
  std::memcpy(&h0, out.data() + 16, sizeof(h0));
  EXPECT_EQ(h0.len, 19u);
  EXPECT_EQ(h0.error, 0);
  EXPECT_EQ(out[32], 1);
  EXPECT_EQ(out[34], 3);
  std::memcpy(&h1, out.data() + 35, sizeof(h1));
  EXPECT_EQ(h1.len, 16u);
  EXPECT_EQ(h1.error, -ENOENT);
  EXPECT_EQ(h1.unique, 1u);
}

// ---- through the Session: the normal handlers serve the sub-requests ----

class OpenAttrFs : public RawFileSystem {
 public:
  void Open(Replier r, uint64_t nodeid, const fuse_open_in&) override {
    opened = nodeid;
    if (nodeid == 404) return r.Error(ENOENT);
    fuse_open_out o{};
    o.fh = 77;
    r.Open(o);
  }
  void GetAttr(Replier r, uint64_t nodeid, const fuse_getattr_in&) override {
    if (hold_getattr) {
      held = std::make_unique<Replier>(std::move(r));
      return;
    }
    r.Attr(Attr(nodeid));
  }
  static fuse_attr_out Attr(uint64_t nodeid) {
    fuse_attr_out a{};
    a.attr.ino = nodeid;
    a.attr.size = 12345;
    a.attr.mode = 0100644;
    return a;
  }
  uint64_t opened = 0;
  bool hold_getattr = false;
  std::unique_ptr<Replier> held;
};

class CompoundSessionTest : public ::testing::Test {
 protected:
  void Make(bool refuse = false) {
    SessionOptions o;
    o.transport = TransportChoice::kDev;
    o.refuse_compound = refuse;
    session = std::make_unique<Session>(&fs, o);
    RecordedReply rec;
    session->DispatchDevBuffer(
        new FakeInFlight(&rec, true),
        WireRequest(FUSE_INIT, 1, 0)
            .Struct(KernelInit(45, FUSE_MAX_PAGES | FUSE_HAS_COMPOUND))
            .Build());
    ASSERT_EQ(rec.error, 0);
    fuse_init_out out{};
    std::memcpy(&out, rec.body.data(), sizeof(out));
    EXPECT_TRUE(out.flags2 & (FUSE_HAS_COMPOUND >> 32));
  }
  std::vector<uint8_t> CompoundBuf(uint64_t unique, uint32_t count,
                                   const std::vector<uint8_t>& subs) {
    fuse_compound_in h = Header(count);
    h.result_size = sizeof(fuse_open_out) + sizeof(fuse_attr_out);
    return WireRequest(FUSE_COMPOUND, unique, 5)
        .Struct(h)
        .Bytes(std::string(reinterpret_cast<const char*>(subs.data()),
                           subs.size()))
        .Build();
  }
  // Splits a compound reply into (header, payload) per sub-reply.
  static std::vector<std::pair<fuse_out_header, std::string>> Split(
      const std::string& body) {
    std::vector<std::pair<fuse_out_header, std::string>> out;
    EXPECT_GE(body.size(), sizeof(fuse_compound_out));
    fuse_compound_out co{};
    std::memcpy(&co, body.data(), sizeof(co));
    size_t pos = sizeof(co);
    for (uint32_t i = 0; i < co.count; ++i) {
      fuse_out_header h{};
      if (pos + sizeof(h) > body.size()) break;
      std::memcpy(&h, body.data() + pos, sizeof(h));
      if (h.len < sizeof(h) || pos + h.len > body.size()) break;
      out.emplace_back(h, body.substr(pos + sizeof(h), h.len - sizeof(h)));
      pos += h.len;
    }
    EXPECT_EQ(pos, body.size());
    return out;
  }

  OpenAttrFs fs;
  std::unique_ptr<Session> session;
};

TEST_F(CompoundSessionTest, OpenPlusGetattrInOneReply) {
  Make();
  RecordedReply rec;
  session->DispatchDevBuffer(
      new FakeInFlight(&rec, true),
      CompoundBuf(10, 2, Concat({OpenSub(0, 5), GetAttrSub(1, 5)})));
  ASSERT_TRUE(rec.done);
  ASSERT_EQ(rec.error, 0);
  auto subs = Split(rec.body);
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0].first.error, 0);
  EXPECT_EQ(subs[0].first.unique, 0u);
  ASSERT_EQ(subs[0].second.size(), sizeof(fuse_open_out));
  fuse_open_out o;
  std::memcpy(&o, subs[0].second.data(), sizeof(o));
  EXPECT_EQ(o.fh, 77u);
  EXPECT_EQ(subs[1].first.unique, 1u);
  ASSERT_EQ(subs[1].second.size(), sizeof(fuse_attr_out));
  fuse_attr_out a;
  std::memcpy(&a, subs[1].second.data(), sizeof(a));
  EXPECT_EQ(a.attr.size, 12345u);
  EXPECT_EQ(fs.opened, 5u);
  auto st = session->Stats();
  EXPECT_EQ(st.per_opcode[FUSE_COMPOUND], 1u);
  EXPECT_EQ(st.per_opcode[FUSE_OPEN], 1u);
  EXPECT_EQ(st.per_opcode[FUSE_GETATTR], 1u);
}

TEST_F(CompoundSessionTest, ASubRequestErrorTravelsInsideTheReply) {
  Make();
  RecordedReply rec;
  session->DispatchDevBuffer(
      new FakeInFlight(&rec, true),
      CompoundBuf(10, 2, Concat({OpenSub(0, 404), GetAttrSub(1, 404)})));
  ASSERT_EQ(rec.error, 0);
  auto subs = Split(rec.body);
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0].first.error, -ENOENT);
  EXPECT_TRUE(subs[0].second.empty());
  EXPECT_EQ(subs[1].first.error, 0);
}

TEST_F(CompoundSessionTest, ReplyWaitsForTheLastSubReply) {
  Make();
  fs.hold_getattr = true;
  RecordedReply rec;
  session->DispatchDevBuffer(
      new FakeInFlight(&rec, true),
      CompoundBuf(10, 2, Concat({GetAttrSub(0, 5), OpenSub(1, 5)})));
  EXPECT_FALSE(rec.done);  // GETATTR still held, OPEN answered
  ASSERT_TRUE(fs.held);
  fs.held->Attr(OpenAttrFs::Attr(5));
  ASSERT_TRUE(rec.done);
  auto subs = Split(rec.body);
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0].second.size(), sizeof(fuse_attr_out));  // request order
  EXPECT_EQ(subs[1].second.size(), sizeof(fuse_open_out));
}

TEST_F(CompoundSessionTest, MalformedCompoundsAnswerEinvalAndCount) {
  Make();
  auto good = Concat({OpenSub(0, 5), GetAttrSub(1, 5)});
  std::vector<std::vector<uint8_t>> bad = {
      CompoundBuf(10, 0, {}),
      CompoundBuf(11, 17, good),
      CompoundBuf(12, 2, std::vector<uint8_t>(good.begin(), good.end() - 1)),
      CompoundBuf(13, 1, CompoundBuf(0, 1, GetAttrSub(0, 1))),
  };
  for (const auto& b : bad) {
    RecordedReply rec;
    session->DispatchDevBuffer(new FakeInFlight(&rec, true), b);
    EXPECT_TRUE(rec.done);
    EXPECT_EQ(rec.error, EINVAL);
  }
  auto st = session->Stats();
  EXPECT_EQ(st.malformed, bad.size());
  EXPECT_EQ(st.per_opcode[FUSE_OPEN], 0u);  // nothing half-served
  EXPECT_EQ(fs.opened, 0u);
}

TEST_F(CompoundSessionTest, RefusedWithEnosysWhenTold) {
  Make(/*refuse=*/true);
  RecordedReply rec;
  session->DispatchDevBuffer(
      new FakeInFlight(&rec, true),
      CompoundBuf(10, 2, Concat({OpenSub(0, 5), GetAttrSub(1, 5)})));
  EXPECT_TRUE(rec.done);
  EXPECT_EQ(rec.error, ENOSYS);
  EXPECT_EQ(fs.opened, 0u);
  EXPECT_EQ(session->Stats().per_opcode[FUSE_COMPOUND], 1u);
}

TEST(CompoundInit, AskedForOnlyWhenOfferedAndWanted) {
  for (bool want : {true, false}) {
    for (bool offered : {true, false}) {
      SessionOptions o;
      o.transport = TransportChoice::kDev;
      o.init.compound = want;
      RawFileSystem fs;
      Session s(&fs, o);
      RecordedReply rec;
      s.DispatchDevBuffer(
          new FakeInFlight(&rec, true),
          WireRequest(FUSE_INIT, 1, 0)
              .Struct(KernelInit(
                  45, FUSE_MAX_PAGES | (offered ? FUSE_HAS_COMPOUND : 0)))
              .Build());
      fuse_init_out out{};
      std::memcpy(&out, rec.body.data(), sizeof(out));
      EXPECT_EQ((out.flags2 & (FUSE_HAS_COMPOUND >> 32)) != 0, want && offered)
          << "want " << want << " offered " << offered;
    }
  }
}

}  // namespace
}  // namespace stripefs::fuse
