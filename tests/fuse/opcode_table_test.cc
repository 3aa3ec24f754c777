// The opcode table: every opcode of fuse_abi.h has one row whose layout
// matches its wire struct, and the reply rules the Session relies on.
#include "fuse/opcode_table.h"

#include <gtest/gtest.h>

#include <set>

#include "fuse/request_parser.h"

namespace stripefs::fuse {
namespace {

using namespace fuse_abi;  // NOLINT

TEST(OpcodeTable, EveryRegularOpcodeHasOneNamedRow) {
  std::set<std::string_view> names;
  int rows = 0;
  for (uint32_t op = 0; op < kOpcodeLimit; ++op) {
    const OpcodeRow* r = FindOpcode(op);
    if (!r) continue;
    ++rows;
    EXPECT_EQ(r->opcode, op);
    EXPECT_FALSE(r->name.empty()) << op;
    EXPECT_TRUE(names.insert(r->name).second) << r->name;
    EXPECT_EQ(OpcodeName(op), r->name);
  }
  // fuse_abi::Opcode lists 52 regular opcodes (1..53 without 7 and 19, and
  // the series' FUSE_COMPOUND, 101).
  EXPECT_EQ(rows, 52);
  EXPECT_EQ(FindOpcode(54), nullptr);
  EXPECT_EQ(OpcodeName(FUSE_COMPOUND), "COMPOUND");
  EXPECT_EQ(FindOpcode(0), nullptr);
  EXPECT_EQ(FindOpcode(7), nullptr);
  EXPECT_EQ(FindOpcode(kOpcodeLimit), nullptr);
  EXPECT_EQ(OpcodeName(CUSE_INIT), "CUSE_INIT");
  EXPECT_EQ(OpcodeName(999), "UNKNOWN");
}

TEST(OpcodeTable, LayoutsComeFromTheWireStructs) {
  EXPECT_EQ(FindOpcode(FUSE_WRITE)->fixed, sizeof(fuse_write_in));
  EXPECT_EQ(FindOpcode(FUSE_WRITE)->tail, Tail::kData);
  EXPECT_EQ(FindOpcode(FUSE_STATX)->fixed, sizeof(fuse_statx_in));
  EXPECT_EQ(FindOpcode(FUSE_SETXATTR)->fixed, FUSE_COMPAT_SETXATTR_IN_SIZE);
  EXPECT_EQ(FindOpcode(FUSE_SETXATTR)->fixed_ext, sizeof(fuse_setxattr_in));
  EXPECT_EQ(FindOpcode(FUSE_INIT)->min_fixed, FUSE_COMPAT_INIT_IN_SIZE);
  EXPECT_EQ(NameCount(FindOpcode(FUSE_LOOKUP)->tail), 1);
  EXPECT_EQ(NameCount(FindOpcode(FUSE_RENAME2)->tail), 2);
  EXPECT_EQ(NameCount(FindOpcode(FUSE_SETXATTR)->tail), 1);
  EXPECT_EQ(NameCount(FindOpcode(FUSE_READ)->tail), 0);
  ParseOptions ext;
  ext.setxattr_ext = true;
  EXPECT_EQ(*FixedArgSize(FUSE_SETXATTR, {}), FUSE_COMPAT_SETXATTR_IN_SIZE);
  EXPECT_EQ(*FixedArgSize(FUSE_SETXATTR, ext), sizeof(fuse_setxattr_in));
}

TEST(OpcodeTable, ReplyRulesAndInitOrder) {
  EXPECT_TRUE(IsNoReplyOpcode(FUSE_FORGET));
  EXPECT_TRUE(IsNoReplyOpcode(FUSE_BATCH_FORGET));
  EXPECT_FALSE(IsNoReplyOpcode(FUSE_INTERRUPT));
  EXPECT_EQ(FindOpcode(FUSE_INTERRUPT)->reply, ReplyRule::kOnlyEagain);
  EXPECT_FALSE(IsNoReplyOpcode(FUSE_LOOKUP));
  EXPECT_FALSE(IsNoReplyOpcode(999));
  for (uint32_t op = 0; op < kOpcodeLimit; ++op) {
    const OpcodeRow* r = FindOpcode(op);
    if (!r) continue;
    EXPECT_EQ(r->before_init, op == FUSE_INIT) << r->name;
  }
}

TEST(OpcodeTable, NamedOnlyRowsAreNotParsed) {
  // DAX mapping opcodes have a name but no handler: the parser says ENOSYS.
  ASSERT_NE(FindOpcode(FUSE_SETUPMAPPING), nullptr);
  EXPECT_EQ(FindOpcode(FUSE_SETUPMAPPING)->handler, nullptr);
  EXPECT_FALSE(FixedArgSize(FUSE_SETUPMAPPING, {}).has_value());
  fuse_in_header h{};
  h.opcode = FUSE_SETUPMAPPING;
  h.len = sizeof(h);
  EXPECT_EQ(ParseRequest(h, {}, {}, {}).error, ENOSYS);
}

}  // namespace
}  // namespace stripefs::fuse
