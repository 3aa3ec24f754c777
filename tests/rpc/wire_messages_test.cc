// Unit tests of the payload codec: Encoder/Decoder bounds checks and a
// round trip of the request and response of every message type.
#include "backend/rpc/wire_messages.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "backend/rpc/frame.h"
#include "tests/rpc/fuzz/fuzz_key.h"
#include "tests/rpc/sample_values.h"

namespace stripefs::rpc {
namespace {

using testing::Sampler;

TEST(WireCodecTest, IntegersAndStringsRoundTrip) {
  std::vector<uint8_t> buf;
  Encoder e(&buf);
  e.U8(0xAB);
  e.U16(0xBEEF);
  e.U32(0xDEADBEEF);
  e.U64(0x0123456789ABCDEFull);
  e.I64(-5);
  e.Bool(true);
  e.String(std::string("a\0b", 3));
  Decoder d(buf);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  int64_t i64;
  bool b;
  std::string s;
  ASSERT_TRUE(d.U8(&u8) && d.U16(&u16) && d.U32(&u32) && d.U64(&u64) &&
              d.I64(&i64) && d.Bool(&b) && d.String(&s));
  EXPECT_TRUE(d.Done());
  EXPECT_EQ(u8, 0xAB);
  EXPECT_EQ(u16, 0xBEEF);
  EXPECT_EQ(u32, 0xDEADBEEFu);
  EXPECT_EQ(u64, 0x0123456789ABCDEFull);
  EXPECT_EQ(i64, -5);
  EXPECT_TRUE(b);
  EXPECT_EQ(s, std::string("a\0b", 3));
}

TEST(WireCodecTest, LittleEndianLayout) {
  std::vector<uint8_t> buf;
  Encoder e(&buf);
  e.U32(0x04030201);
  EXPECT_EQ(buf, (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST(WireCodecTest, StringLengthPastEndFailsAndLatches) {
  std::vector<uint8_t> buf;
  Encoder e(&buf);
  e.U32(1000);  // claims 1000 bytes
  e.U32(7);
  Decoder d(buf);
  std::string s;
  EXPECT_FALSE(d.String(&s));
  EXPECT_FALSE(d.ok());
  uint32_t x;
  EXPECT_FALSE(d.U32(&x));  // latched
}

TEST(WireCodecTest, HugeVectorCountFailsWithoutAllocating) {
  std::vector<uint8_t> buf;
  Encoder e(&buf);
  e.U32(0xFFFFFFFFu);  // count
  e.U64(1);
  Decoder d(buf);
  std::vector<DirEntry> v;
  EXPECT_FALSE(Get(d, &v));
  EXPECT_TRUE(v.empty());
}

TEST(WireCodecTest, BadEnumAndBoolValuesFail) {
  std::vector<uint8_t> buf{7};
  Decoder d(buf);
  ServerState st;
  EXPECT_FALSE(Get(d, &st));
  Decoder d2{std::span<const uint8_t>(buf)};
  bool b;
  EXPECT_FALSE(d2.Bool(&b));
}

TEST(WireCodecTest, StatusRoundTripsAndRejectsBadCodes) {
  std::vector<uint8_t> buf;
  Encoder e(&buf);
  PutStatus(e, Status(ENOENT, "no entry 'x'"));
  Decoder d(buf);
  Status s;
  ASSERT_TRUE(GetStatus(d, &s));
  EXPECT_EQ(s.code(), ENOENT);
  EXPECT_EQ(s.message(), "no entry 'x'");
  std::vector<uint8_t> bad;
  Encoder e2(&bad);
  e2.I32(-1);
  e2.String("");
  Decoder d2(bad);
  EXPECT_FALSE(GetStatus(d2, &s));
}

TEST(WireMessagesTest, TypeNumbersAndNamesAreUnique) {
  std::set<uint16_t> nums;
  std::set<std::string> names;
  for (MsgType t : AllMsgTypes()) {
    auto n = static_cast<uint16_t>(t);
    EXPECT_TRUE(nums.insert(n).second) << n;
    ASSERT_NE(MsgTypeName(n), nullptr);
    EXPECT_TRUE(names.insert(MsgTypeName(n)).second);
  }
  // Including DropStripes (45), DeleteChunkVersions (72), PurgeInodes (73),
  // SyncMetadata (74), ClientHeartbeat (75), ListClients (76),
  // ListOrphanStripes (77), CreateEntry (78), UnlinkEntry (79),
  // ApplyChunkOps (80), ReadChunkRanges (81), AuthAdd (82), AuthList (83),
  // AuthRemove (84), CommitStripesKeepTimes (85), DropStripesKeepTimes (86),
  // GrantChunks (87) and RevokeGrants (88).
  EXPECT_EQ(AllMsgTypes().size(), 56u);
  EXPECT_EQ(MsgTypeName(999), nullptr);
}

// The fuzz targets start from tests/rpc/corpus: a message without seeds is
// fuzzed only by chance. rpc_fuzz_seeds (tests/rpc/fuzz/make_seeds.cc)
// writes them when messages change.
TEST(WireMessagesTest, EveryMessageHasFuzzSeeds) {
  const std::string corpus = STRIPEFS_RPC_CORPUS_DIR;
  for (MsgType t : AllMsgTypes()) {
    const std::string name = MsgTypeName(static_cast<uint16_t>(t));
    for (const std::string& f :
         {"/payload/" + name + ".req", "/payload/" + name + ".resp",
          "/frame/" + name + ".frame"}) {
      EXPECT_TRUE(std::filesystem::exists(corpus + f))
          << corpus + f
          << " is missing: run build/tests/rpc/rpc_fuzz_seeds tests/rpc/corpus";
    }
  }
}

// ... and every seed decodes with the current layouts: after a layout
// change (ApplyChunkOps's range list) stale seeds would be refused at the
// first changed field, and the fuzzers would seldom reach what follows.
// The ApplyChunkOps frame carries a range list.
TEST(WireMessagesTest, FuzzSeedsDecodeWithTheCurrentLayouts) {
  const std::string corpus = STRIPEFS_RPC_CORPUS_DIR;
  auto slurp = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  };
  const std::string stale =
      ": stale, run build/tests/rpc/rpc_fuzz_seeds tests/rpc/corpus";
  for (MsgType t : AllMsgTypes()) {
    const auto num = static_cast<uint16_t>(t);
    const std::string name = MsgTypeName(num);
    for (const char* suffix : {".req", ".resp"}) {
      const std::string path = corpus + "/payload/" + name + suffix;
      const std::vector<uint8_t> seed = slurp(path);
      ASSERT_GE(seed.size(), 3u) << path;
      EXPECT_EQ(seed[0] | (seed[1] << 8), num) << path;
      EXPECT_TRUE(
          DecodePayloadChecked(num, seed[2] & 1, std::span(seed).subspan(3)))
          << path << stale;
    }
    const std::string path = corpus + "/frame/" + name + ".frame";
    stripefs::testing::Link link = FuzzLink();
    auto frame = DecodeFrame(link.rx, slurp(path));
    ASSERT_TRUE(frame.ok()) << path << ": " << frame.status().ToString();
    EXPECT_EQ(frame->header.type, num) << path;
    EXPECT_TRUE(DecodePayloadChecked(num, false, frame->payload))
        << path << stale;
    if (t == MsgType::kApplyChunkOps) {
      Msg<MsgType::kApplyChunkOps>::Request req;
      ASSERT_TRUE(DecodeRequest<MsgType::kApplyChunkOps>(frame->payload, &req));
      EXPECT_FALSE(std::get<1>(req).empty()) << path << ": no patch ranges";
    }
  }
}

// Round trip of request and response of message T with sample values, plus
// rejection of every truncation and of trailing garbage.
template <MsgType T>
void CheckMessage() {
  const char* name = MsgTypeName(static_cast<uint16_t>(T));
  SCOPED_TRACE(name);
  Sampler smp;
  auto req = smp.Make<typename Msg<T>::Request>();
  auto req_bytes = EncodeRequest<T>(req);
  typename Msg<T>::Request req2{};
  ASSERT_TRUE(DecodeRequest<T>(req_bytes, &req2));
  EXPECT_EQ(EncodeRequest<T>(req2), req_bytes);
  EXPECT_TRUE(DecodePayloadChecked(static_cast<uint16_t>(T), false, req_bytes));

  auto resp = smp.Make<typename Msg<T>::Response>();
  auto resp_bytes = EncodeResponse<T>(Status::Ok(), resp);
  Status remote(EIO, "x");
  typename Msg<T>::Response resp2{};
  ASSERT_TRUE(DecodeResponse<T>(resp_bytes, &remote, &resp2));
  EXPECT_TRUE(remote.ok());
  EXPECT_EQ(EncodeResponse<T>(Status::Ok(), resp2), resp_bytes);
  EXPECT_TRUE(DecodePayloadChecked(static_cast<uint16_t>(T), true, resp_bytes));

  auto err_bytes = EncodeResponse<T>(Status(ESTALE, "stale version"), {});
  ASSERT_TRUE(DecodeResponse<T>(err_bytes, &remote, &resp2));
  EXPECT_EQ(remote.code(), ESTALE);
  EXPECT_EQ(remote.message(), "stale version");

  for (size_t n = 0; n < resp_bytes.size(); ++n) {
    typename Msg<T>::Response r{};
    EXPECT_FALSE(DecodeResponse<T>(
        std::span<const uint8_t>(resp_bytes.data(), n), &remote, &r))
        << "response prefix " << n;
  }
  for (size_t n = 0; n < req_bytes.size(); ++n) {
    typename Msg<T>::Request r{};
    EXPECT_FALSE(
        DecodeRequest<T>(std::span<const uint8_t>(req_bytes.data(), n), &r))
        << "request prefix " << n;
  }
  req_bytes.push_back(0);
  EXPECT_FALSE(DecodeRequest<T>(req_bytes, &req2));
  resp_bytes.push_back(0);
  EXPECT_FALSE(DecodeResponse<T>(resp_bytes, &remote, &resp2));
}

TEST(WireMessagesTest, EveryMessageRoundTrips) {
#define STRIPEFS_X(name, num, idem) CheckMessage<MsgType::k##name>();
  STRIPEFS_RPC_MESSAGES(STRIPEFS_X)
#undef STRIPEFS_X
}

TEST(WireMessagesTest, FieldsLandInTheRightPlaces) {
  Msg<MsgType::kLookup>::Request req{42, "hello"};
  auto bytes = EncodeRequest<MsgType::kLookup>(req);
  Msg<MsgType::kLookup>::Request out{};
  ASSERT_TRUE(DecodeRequest<MsgType::kLookup>(bytes, &out));
  EXPECT_EQ(std::get<0>(out), 42u);
  EXPECT_EQ(std::get<1>(out), "hello");

  Sampler smp;
  InodeAttr a = smp.Make<InodeAttr>();
  auto rb = EncodeResponse<MsgType::kGetAttr>(Status::Ok(), {a});
  Status st;
  Msg<MsgType::kGetAttr>::Response r{};
  ASSERT_TRUE(DecodeResponse<MsgType::kGetAttr>(rb, &st, &r));
  EXPECT_EQ(std::get<0>(r), a);

  ClusterMap m = smp.Make<ClusterMap>();
  auto mb = EncodeResponse<MsgType::kGetClusterMap>(Status::Ok(), {m});
  Msg<MsgType::kGetClusterMap>::Response mr{};
  ASSERT_TRUE(DecodeResponse<MsgType::kGetClusterMap>(mb, &st, &mr));
  EXPECT_EQ(std::get<0>(mr).epoch, m.epoch);
  EXPECT_EQ(std::get<0>(mr).servers, m.servers);
}

TEST(WireMessagesTest, UnknownTypeDoesNotDecode) {
  std::vector<uint8_t> empty;
  EXPECT_FALSE(DecodePayloadChecked(999, false, empty));
}

}  // namespace
}  // namespace stripefs::rpc
