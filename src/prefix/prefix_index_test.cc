// PrefixIndex must pick what the linear FindLongestPrefixAgent picks over the
// same texts in id order, for namespaces of thousands of agents.
#include "prefix/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "prefix/agent_lookup.h"

namespace agentkv {
namespace {

// The reference: the linear scan over the texts in id order.
std::optional<PrefixIndex::Hit> Linear(const std::map<std::string, std::string>& agents, std::string_view prompt) {
  std::vector<std::string> ids;
  std::vector<std::string_view> texts;
  for (const auto& [id, text] : agents) {
    ids.push_back(id);
    texts.push_back(text);
  }
  auto best = FindLongestPrefixAgent(texts, prompt);
  if (!best) return std::nullopt;
  return PrefixIndex::Hit{ids[best->index], best->common_bytes};
}

// Texts from a small alphabet, many sharing "system prompts", some prefixes
// of others, some multi-byte UTF-8.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kHeads = {"", "You are helpful. ", "You are helpful. User: ", "Système: é ",
                                                  "abc"};
  static const std::vector<std::string> kPieces = {"a", "b", "ab", " ", "é", "€", "User: hi", "\n"};
  std::string s = kHeads[rng() % kHeads.size()];
  const int n = static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i) s += kPieces[rng() % kPieces.size()];
  return s;
}

TEST(PrefixIndexTest, MatchesLinearScanOnThousandsOfAgents) {
  std::mt19937 rng(12);
  std::map<std::string, std::string> agents;
  PrefixIndex index(/*max_tie_scan=*/100000);  // no cap: must equal the scan exactly
  for (int i = 0; i < 3000; ++i) {
    const std::string id = "agent-" + std::to_string(rng() % 2500);  // some ids are replaced
    const std::string text = RandomText(rng);
    if (text.empty()) {
      agents.erase(id);
    } else {
      agents[id] = text;
    }
    index.Set(id, text);
    if (rng() % 10 == 0) {  // and some removed
      const std::string gone = "agent-" + std::to_string(rng() % 2500);
      agents.erase(gone);
      index.Remove(gone);
    }
  }
  ASSERT_EQ(index.size(), agents.size());
  for (int q = 0; q < 2000; ++q) {
    const std::string prompt = RandomText(rng) + (rng() % 2 ? RandomText(rng) : "");
    auto want = Linear(agents, prompt);
    auto got = index.FindLongestPrefix(prompt);
    ASSERT_EQ(got.has_value(), want.has_value()) << prompt;
    if (!want) continue;
    EXPECT_EQ(got->id, want->id) << prompt;
    EXPECT_EQ(got->common_bytes, want->common_bytes) << prompt;
  }
}

TEST(PrefixIndexTest, TieOnTextPrefersExtendThenLowestId) {
  PrefixIndex index;
  index.Set("z", "abc");
  index.Set("a", "abcXYZ");
  index.Set("m", "abc");
  auto hit = index.FindLongestPrefix("abcdef");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->id, "m");  // "abc" is the shortest; "m" < "z"
  EXPECT_EQ(hit->common_bytes, 3u);
  index.Set("m", "");  // an empty text removes
  EXPECT_EQ(index.FindLongestPrefix("abcdef")->id, "z");
  EXPECT_FALSE(index.FindLongestPrefix("xyz"));
  EXPECT_FALSE(index.FindLongestPrefix(""));
}

TEST(PrefixIndexTest, CappedTieScanStillFindsTheExtendCandidate) {
  PrefixIndex index(/*max_tie_scan=*/4);
  for (int i = 0; i < 100; ++i) index.Set("d" + std::to_string(i), "sys|" + std::to_string(i));
  index.Set("e", "sys|");  // the text P extends sorts first in the run
  auto hit = index.FindLongestPrefix("sys|new question");
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->id, "e");
  EXPECT_EQ(hit->common_bytes, 4u);
  index.Remove("e");
  EXPECT_EQ(index.size(), 100u);
  EXPECT_TRUE(index.FindLongestPrefix("sys|new question"));  // some DIVERGE candidate of the first 4
}

TEST(PrefixIndexTest, BytesFollowTheTexts) {
  PrefixIndex index;
  index.Set("a", std::string(1000, 'x'));
  const size_t one = index.bytes();
  EXPECT_GE(one, 1000u);
  index.Set("a", std::string(10, 'x'));
  EXPECT_LT(index.bytes(), one);
  index.Remove("a");
  EXPECT_EQ(index.bytes(), 0u);
}

}  // namespace
}  // namespace agentkv
