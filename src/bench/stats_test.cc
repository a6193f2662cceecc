#include "bench/stats.h"

#include <gtest/gtest.h>

namespace agentkv::bench {
namespace {

TEST(SummarizeTest, OddEvenEmpty) {
  Summary odd = Summarize({3, 1, 2});
  EXPECT_EQ(odd.n, 3);
  EXPECT_DOUBLE_EQ(odd.median, 2);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 3);
  EXPECT_DOUBLE_EQ(Summarize({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(Summarize({}).n, 0);
}

TEST(MarkdownTableTest, PadsShortRows) {
  EXPECT_EQ(MarkdownTable({"a", "b"}, {{"1"}}), "| a | b |\n| --- | --- |\n| 1 |  |\n");
}

TEST(FormatTest, LongStrings) {
  const std::string long_arg(2000, 'x');
  EXPECT_EQ(Format("<%s>", long_arg.c_str()), "<" + long_arg + ">");
  EXPECT_EQ(Format("%.2f", 1.234), "1.23");
}

}  // namespace
}  // namespace agentkv::bench
