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

}  // namespace
}  // namespace agentkv::sched
