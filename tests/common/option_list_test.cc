#include "common/option_list.h"

#include <gtest/gtest.h>

namespace stripefs {
namespace {

using List = std::vector<std::string>;

TEST(SplitOptionLists, FlattensEveryListInOrder) {
  EXPECT_EQ(SplitOptionLists({"nosuid,relatime", "ro", "a,b,c"}),
            (List{"nosuid", "relatime", "ro", "a", "b", "c"}));
}

TEST(SplitOptionLists, KeepsEmptyItemsForTheCallerToSkip) {
  EXPECT_EQ(SplitOptionLists({""}), (List{""}));
  EXPECT_EQ(SplitOptionLists({"a,,b,"}), (List{"a", "", "b", ""}));
  EXPECT_EQ(SplitOptionLists({",x"}), (List{"", "x"}));
  EXPECT_TRUE(SplitOptionLists({}).empty());
}

TEST(SplitOptionLists, KeepsValuesWithEqualsSigns) {
  EXPECT_EQ(SplitOptionLists({"meta=h:1,key=/k=v"}),
            (List{"meta=h:1", "key=/k=v"}));
}

}  // namespace
}  // namespace stripefs
