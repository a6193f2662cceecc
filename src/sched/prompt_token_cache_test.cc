// PromptTokenCache: an LRU by bytes of agents' last prompts.
#include "sched/prompt_token_cache.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

std::shared_ptr<const engine::PromptTokens> Prompt(size_t chars) {
  auto p = std::make_shared<engine::PromptTokens>();
  p->text.assign(chars, 'x');
  p->tokenized.tokens.assign(chars / 4, 7);
  p->tokenized.spans.assign(chars / 4, {});
  return p;
}

AgentKey Key(const std::string& id) { return {"ns", id}; }

TEST(PromptTokenCacheTest, KeepsTheLastPromptPerAgent) {
  PromptTokenCache cache(1 << 20);
  EXPECT_EQ(cache.Get(Key("a")), nullptr);
  auto first = Prompt(100), second = Prompt(200);
  cache.Put(Key("a"), first);
  cache.Put(Key("a"), second);
  EXPECT_EQ(cache.Get(Key("a")), second);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.bytes(), PromptTokenCache::BytesOf(*second) + 2 + 1);
  EXPECT_EQ(cache.Get({"other-ns", "a"}), nullptr);  // namespaces are apart
  cache.Erase(Key("a"));
  EXPECT_EQ(cache.Get(Key("a")), nullptr);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(PromptTokenCacheTest, EvictsLeastRecentlyUsedWithinTheBudget) {
  const size_t one = PromptTokenCache::BytesOf(*Prompt(1000)) + 3;
  PromptTokenCache cache(3 * one);
  cache.Put(Key("a"), Prompt(1000));
  cache.Put(Key("b"), Prompt(1000));
  cache.Put(Key("c"), Prompt(1000));
  ASSERT_NE(cache.Get(Key("a")), nullptr);  // a is now the most recent
  cache.Put(Key("d"), Prompt(1000));        // b goes
  EXPECT_EQ(cache.Get(Key("b")), nullptr);
  EXPECT_NE(cache.Get(Key("a")), nullptr);
  EXPECT_NE(cache.Get(Key("c")), nullptr);
  EXPECT_NE(cache.Get(Key("d")), nullptr);
  EXPECT_LE(cache.bytes(), 3 * one);
  cache.Put(Key("huge"), Prompt(100000));  // larger than the budget: not kept, nothing evicted for it
  EXPECT_EQ(cache.Get(Key("huge")), nullptr);
  EXPECT_EQ(cache.size(), 3u);
}

std::shared_ptr<const engine::PromptTokens> Text(std::string text) {
  auto p = std::make_shared<engine::PromptTokens>();
  p->text = std::move(text);
  return p;
}

// A new agent's prompt is tokenized from the entry of its namespace that
// shares the longest prefix with it, if that prefix reaches the minimum.
TEST(PromptTokenCacheTest, LongestPrefixPicksTheEntryOfTheNamespaceThatSharesTheMost) {
  PromptTokenCache cache(1 << 20);
  const std::string system(2000, 's');
  auto shorter = Text(system.substr(0, 1500) + "planner");
  auto longer = Text(system + "coder: fix the bug");
  auto elsewhere = Text(system + "coder: fix the bug and more");  // shares more, but in another namespace
  cache.Put(Key("planner"), shorter);
  cache.Put(Key("coder"), longer);
  cache.Put({"other-ns", "coder"}, elsewhere);
  const std::string prompt = system + "coder: fix the bug and more";
  EXPECT_EQ(cache.LongestPrefix("ns", prompt, 1024), longer);
  EXPECT_EQ(cache.LongestPrefix("other-ns", prompt, 1024), elsewhere);
  EXPECT_EQ(cache.LongestPrefix("third-ns", prompt, 1024), nullptr);  // namespaces never cross
  EXPECT_EQ(cache.LongestPrefix("ns", system.substr(0, 1500) + "planner, again", 1024), shorter);
  EXPECT_EQ(cache.LongestPrefix("ns", system.substr(0, 1500) + "reviewer", 1024), longer);  // ties: the first key
  EXPECT_EQ(cache.LongestPrefix("ns", prompt, 2100), nullptr);  // below the minimum
  EXPECT_EQ(cache.LongestPrefix("ns", "x" + prompt, 1), nullptr);
  // Not a use: the entry it found is still the least recently used.
  PromptTokenCache small(PromptTokenCache::BytesOf(*longer) * 2);
  small.Put(Key("old"), shorter);
  small.Put(Key("new"), longer);
  ASSERT_EQ(small.LongestPrefix("ns", system.substr(0, 1500) + "planner, again", 1), shorter);
  small.Put(Key("third"), Text(std::string(2000, 'z')));
  EXPECT_EQ(small.Get(Key("old")), nullptr);
  EXPECT_NE(small.Get(Key("new")), nullptr);
}

}  // namespace
}  // namespace agentkv::sched
