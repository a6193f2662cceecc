#include "util/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace agentkv {
namespace {

std::string Nested(size_t levels, char open = '[', char close = ']') {
  return std::string(levels, open) + std::string(levels, close);
}

TEST(JsonDepthTest, CountsObjectsAndArrays) {
  EXPECT_EQ(JsonNestingDepth(""), 0u);
  EXPECT_EQ(JsonNestingDepth("42"), 0u);
  EXPECT_EQ(JsonNestingDepth("{}"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}],"c":{}})"), 4u);
  EXPECT_EQ(JsonNestingDepth(Nested(128)), 128u);
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[{{{{"})"), 1u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"\"[[[","b":[]})"), 2u);  // an escaped quote does not end the string
  EXPECT_EQ(JsonNestingDepth(R"(["\\",[[]]])"), 3u);           // an escaped backslash does
}

TEST(JsonDepthTest, StopsAboveTheBound) {
  const std::string deep = Nested(1000000, '{', '}');
  EXPECT_EQ(JsonNestingDepth(deep), kMaxJsonDepth + 1);
  EXPECT_EQ(JsonNestingDepth(deep, 10), 11u);
  EXPECT_FALSE(JsonDepthWithin(deep));
  EXPECT_TRUE(JsonDepthWithin(Nested(kMaxJsonDepth)));
  EXPECT_FALSE(JsonDepthWithin(Nested(kMaxJsonDepth + 1)));
}

TEST(JsonDepthTest, UnbalancedTextCountsItsOpenBrackets) {
  EXPECT_EQ(JsonNestingDepth("]]]["), 1u);
  EXPECT_EQ(JsonNestingDepth(std::string(500, '[')), kMaxJsonDepth + 1);
}

}  // namespace
}  // namespace agentkv
