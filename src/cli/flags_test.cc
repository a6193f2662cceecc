// The subcommands' flag parser and list splitting.
#include "cli/flags.h"

#include <gtest/gtest.h>

namespace agentkv::cli {
namespace {

TEST(FlagsTest, LongShortBooleanPositionalAndUnknown) {
  const char* argv[] = {"serve", "--port", "8080", "-t", "2", "--verbose", "file.txt", "--bogus", "x"};
  Flags f(9, const_cast<char**>(argv), {"verbose"});
  EXPECT_EQ(f.GetOr("port", "", "0"), "8080");
  EXPECT_EQ(f.Get("threads", "t").value_or(""), "2");
  EXPECT_TRUE(f.Has("verbose"));
  ASSERT_EQ(f.positional().size(), 1u);
  EXPECT_EQ(f.positional()[0], "file.txt");
  EXPECT_EQ(f.Unknown({"port", "threads", "t", "verbose"}), std::vector<std::string>{"bogus"});
  long long n = 0;
  std::string err;
  EXPECT_TRUE(f.GetInt("port", "", 1, &n, &err));
  EXPECT_EQ(n, 8080);
  const char* bad[] = {"x", "--port", "80a"};
  Flags g(3, const_cast<char**>(bad));
  EXPECT_FALSE(g.GetInt("port", "", 1, &n, &err));
  EXPECT_FALSE(err.empty());
}

TEST(FlagsTest, SplitCommaListKeepsEmptyItems) {
  EXPECT_EQ(SplitCommaList("q4_0,q8_0,f16"), (std::vector<std::string>{"q4_0", "q8_0", "f16"}));
  EXPECT_EQ(SplitCommaList("1024"), std::vector<std::string>{"1024"});
  EXPECT_EQ(SplitCommaList("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(SplitCommaList(""), std::vector<std::string>{""});
}

}  // namespace
}  // namespace agentkv::cli
