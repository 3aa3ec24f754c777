#include "fuse/request_parser.h"

#include <gtest/gtest.h>

#include "tests/fuse/wire_builder.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT
using testing::WireRequest;

ParseResult Parse(const std::vector<uint8_t>& b, ParseOptions o = {}) {
  return ParseDevBuffer(b, o);
}

TEST(RequestParser, LookupYieldsName) {
  auto b = WireRequest(FUSE_LOOKUP, 7, 1).Name("hello").Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.opcode, FUSE_LOOKUP);
  EXPECT_EQ(r.req.header.unique, 7u);
  EXPECT_EQ(r.req.name, "hello");
  EXPECT_EQ(r.req.in_size, 0u);
}

TEST(RequestParser, NameWithoutNulIsMalformed) {
  auto b = WireRequest(FUSE_LOOKUP, 7).Bytes("hello").Build();
  auto r = Parse(b);
  EXPECT_EQ(r.error, EINVAL);
  EXPECT_NE(r.reason.find("NUL"), std::string::npos) << r.reason;
}

TEST(RequestParser, BytesAfterNameAreMalformed) {
  auto b = WireRequest(FUSE_UNLINK, 7).Name("a").Bytes("xx").Build();
  EXPECT_EQ(Parse(b).error, EINVAL);
}

TEST(RequestParser, ShortBufferAndLengthMismatch) {
  std::vector<uint8_t> tiny(10, 0);
  EXPECT_EQ(Parse(tiny).error, EINVAL);
  auto b = WireRequest(FUSE_GETATTR, 1).Struct(fuse_getattr_in{}).Build();
  b.push_back(0);  // header len no longer matches bytes read
  EXPECT_EQ(Parse(b).error, EINVAL);
}

TEST(RequestParser, UnknownOpcodesAreEnosys) {
  for (uint32_t op : {0u, 7u, 19u, 48u, 49u, 54u, 1000u, 4096u}) {
    auto b = WireRequest(op, 3).Bytes("abcdefgh").Build();
    auto r = Parse(b);
    EXPECT_EQ(r.error, ENOSYS) << "opcode " << op;
  }
}

TEST(RequestParser, FixedStructSizeIsEnforced) {
  auto b = WireRequest(FUSE_GETATTR, 1).Struct(uint64_t{0}).Build();  // 8 < 16
  EXPECT_EQ(Parse(b).error, EINVAL);
  fuse_setattr_in sa{};
  auto ok = WireRequest(FUSE_SETATTR, 1).Struct(sa).Build();
  EXPECT_EQ(Parse(ok).error, 0);
  auto extra = WireRequest(FUSE_SETATTR, 1).Struct(sa).Bytes("x").Build();
  EXPECT_EQ(Parse(extra).error, EINVAL);
}

TEST(RequestParser, WriteExposesDataWithoutCopy) {
  fuse_write_in w{};
  w.fh = 9;
  w.offset = 1 << 20;
  w.size = 5;
  w.write_flags = FUSE_WRITE_CACHE;
  auto b = WireRequest(FUSE_WRITE, 11, 5).Struct(w).Bytes("abcde").Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  auto in = r.req.In<fuse_write_in>();
  EXPECT_EQ(in.offset, 1u << 20);
  EXPECT_EQ(in.size, 5u);
  EXPECT_EQ(in.write_flags & FUSE_WRITE_CACHE, FUSE_WRITE_CACHE);
  ASSERT_EQ(r.req.data.size(), 5u);
  // The data view points into the request buffer itself.
  EXPECT_EQ(r.req.data.data(), b.data() + sizeof(fuse_in_header) + sizeof(w));
  EXPECT_EQ(std::string(r.req.data.begin(), r.req.data.end()), "abcde");
}

TEST(RequestParser, WriteSizeMismatchIsMalformed) {
  fuse_write_in w{};
  w.size = 6;
  auto b = WireRequest(FUSE_WRITE, 11).Struct(w).Bytes("abcde").Build();
  EXPECT_EQ(Parse(b).error, EINVAL);
}

TEST(RequestParser, SetxattrNameAndValue) {
  fuse_setxattr_in s{};
  s.size = 3;
  auto b = WireRequest(FUSE_SETXATTR, 2)
               .Struct(uint32_t{3})
               .Struct(uint32_t{0})
               .Name("user.k")
               .Bytes(std::string_view("v\0w", 3))
               .Build();
  (void)s;
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.name, "user.k");
  EXPECT_EQ(r.req.data.size(), 3u);
  auto bad = WireRequest(FUSE_SETXATTR, 2)
                 .Struct(uint32_t{4})
                 .Struct(uint32_t{0})
                 .Name("user.k")
                 .Bytes("v")
                 .Build();
  EXPECT_EQ(Parse(bad).error, EINVAL);
  // With FUSE_SETXATTR_EXT the struct is 16 bytes.
  fuse_setxattr_in ext{};
  ext.size = 1;
  auto b2 = WireRequest(FUSE_SETXATTR, 2)
                .Struct(ext)
                .Name("user.k")
                .Bytes("v")
                .Build();
  ParseOptions o;
  o.setxattr_ext = true;
  EXPECT_EQ(Parse(b2, o).error, 0);
  EXPECT_EQ(Parse(b2).error, EINVAL);
}

TEST(RequestParser, RenameNeedsTwoNames) {
  fuse_rename2_in rn{};
  rn.newdir = 5;
  rn.flags = kRenameExchange;
  auto b = WireRequest(FUSE_RENAME2, 4).Struct(rn).Name("a").Name("b").Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.name, "a");
  EXPECT_EQ(r.req.name2, "b");
  EXPECT_EQ(r.req.In<fuse_rename2_in>().flags, kRenameExchange);
  auto one = WireRequest(FUSE_RENAME2, 4).Struct(rn).Name("a").Build();
  EXPECT_EQ(Parse(one).error, EINVAL);
  auto sym = WireRequest(FUSE_SYMLINK, 4).Name("link").Name("/target").Build();
  auto rs = Parse(sym);
  ASSERT_EQ(rs.error, 0);
  EXPECT_EQ(rs.req.name2, "/target");
}

TEST(RequestParser, BatchForgetCountMustMatch) {
  fuse_batch_forget_in bf{2, 0};
  fuse_forget_one f1{10, 1}, f2{11, 3};
  auto b = WireRequest(FUSE_BATCH_FORGET, 9, 0)
               .Struct(bf)
               .Struct(f1)
               .Struct(f2)
               .Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.ForgetEntry(1).nodeid, 11u);
  EXPECT_EQ(r.req.ForgetEntry(1).nlookup, 3u);
  fuse_batch_forget_in huge{0xffffffffu, 0};
  auto bad =
      WireRequest(FUSE_BATCH_FORGET, 9, 0).Struct(huge).Struct(f1).Build();
  EXPECT_EQ(Parse(bad).error, EINVAL);
}

TEST(RequestParser, InitAcceptsOldShortStruct) {
  struct {
    uint32_t major, minor, ra, flags;
  } old{7, 20, 4096, 0};
  auto b = WireRequest(FUSE_INIT, 1, 0).Struct(old).Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  auto in = r.req.In<fuse_init_in>();
  EXPECT_EQ(in.minor, 20u);
  EXPECT_EQ(in.flags2, 0u);
  auto tiny = WireRequest(FUSE_INIT, 1, 0).Struct(uint64_t{7}).Build();
  EXPECT_EQ(Parse(tiny).error, EINVAL);
}

TEST(RequestParser, ExtensionsAreSkippedAndBounded) {
  auto b = WireRequest(FUSE_LOOKUP, 1)
               .Name("n")
               .Bytes(std::string(8, 'E'))
               .ExtLen(1)
               .Build();
  auto r = Parse(b);
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.name, "n");
  auto bad = WireRequest(FUSE_LOOKUP, 1).Name("n").ExtLen(100).Build();
  EXPECT_EQ(Parse(bad).error, EINVAL);
}

TEST(RequestParser, UringSplitParsesTheSameWay) {
  // io-uring delivers the fixed struct and the payload separately.
  fuse_in_header h{};
  h.opcode = FUSE_MKDIR;
  h.unique = 77;
  fuse_mkdir_in mk{0755, 022};
  std::string payload("dir\0", 4);
  auto r = ParseRequest(
      h, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&mk), sizeof(mk)),
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()),
                               payload.size()),
      {});
  ASSERT_EQ(r.error, 0) << r.reason;
  EXPECT_EQ(r.req.name, "dir");
  EXPECT_EQ(r.req.In<fuse_mkdir_in>().mode, 0755u);
}

TEST(RequestParser, EveryTruncationIsRejectedOrParsedSafely) {
  fuse_write_in w{};
  w.size = 16;
  std::vector<std::vector<uint8_t>> samples = {
      WireRequest(FUSE_WRITE, 1).Struct(w).Bytes(std::string(16, 'x')).Build(),
      WireRequest(FUSE_RENAME, 1)
          .Struct(fuse_rename_in{3})
          .Name("a")
          .Name("bb")
          .Build(),
      WireRequest(FUSE_CREATE, 1).Struct(fuse_create_in{}).Name("file").Build(),
  };
  for (const auto& full : samples) {
    for (size_t n = 0; n < full.size(); ++n) {
      std::vector<uint8_t> cut(full.begin(), full.begin() + n);
      if (cut.size() >= 4) {
        uint32_t len = static_cast<uint32_t>(cut.size());
        std::memcpy(cut.data(), &len, 4);  // consistent header length
      }
      auto r = Parse(cut);
      EXPECT_NE(r.error, 0) << "truncated to " << n;
    }
    EXPECT_EQ(Parse(full).error, 0);
  }
}

TEST(RequestParser, OpcodeNames) {
  EXPECT_EQ(OpcodeName(FUSE_WRITE), "WRITE");
  EXPECT_EQ(OpcodeName(FUSE_READDIRPLUS), "READDIRPLUS");
  EXPECT_EQ(OpcodeName(999), "UNKNOWN");
  EXPECT_EQ(*FixedArgSize(FUSE_WRITE, {}), sizeof(fuse_write_in));
  EXPECT_EQ(*FixedArgSize(FUSE_LOOKUP, {}), 0u);
  EXPECT_FALSE(FixedArgSize(48, {}).has_value());
}

}  // namespace
}  // namespace stripefs::fuse
