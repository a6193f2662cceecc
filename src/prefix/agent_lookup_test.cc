#include "prefix/agent_lookup.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace agentkv {
namespace {

TEST(AgentLookupTest, PicksLongestCommonPrefix) {
  std::vector<std::string_view> texts = {"System: be brief. User: hi", "System: be brief. User: weather?",
                                         "Other prompt"};
  auto best = FindLongestPrefixAgent(texts, "System: be brief. User: weather? Assistant: sunny. User: and tomorrow?");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->index, 1u);
  EXPECT_EQ(best->common_bytes, texts[1].size());
}

TEST(AgentLookupTest, TiePrefersShorterTextThenLowerIndex) {
  // Both share "abc" with P; agent 1's whole text is "abc" (EXTEND), agent 0 diverges.
  std::vector<std::string_view> texts = {"abcXYZ", "abc", "abc"};
  auto best = FindLongestPrefixAgent(texts, "abcdef");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->index, 1u);
  EXPECT_EQ(best->common_bytes, 3u);
}

TEST(AgentLookupTest, NoneWhenNothingShared) {
  std::vector<std::string_view> texts = {"abc", ""};
  EXPECT_FALSE(FindLongestPrefixAgent(texts, "xyz").has_value());
  EXPECT_FALSE(FindLongestPrefixAgent({}, "xyz").has_value());
  EXPECT_FALSE(FindLongestPrefixAgent(texts, "").has_value());
}

}  // namespace
}  // namespace agentkv
