#include "sched/turn_usage.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

TEST(TurnUsageTest, KeptAndNewTokens) {
  TurnPlan plan;
  plan.match = MatchType::kExtend;
  plan.n_keep = 10;
  api::Usage u;
  u.restore_ms = 1.5;
  SetPromptUsage(plan, 4, api::CacheState::kWarm, /*shared=*/false, &u);
  EXPECT_EQ(u.cache_state, api::CacheState::kWarm);
  EXPECT_EQ(u.match, api::MatchType::kExtend);
  EXPECT_EQ(u.prompt_tokens, 14);
  EXPECT_EQ(u.cached_tokens, 10);
  EXPECT_EQ(u.shared_tokens, 0);
  EXPECT_EQ(u.tokens_prefilled, 4);
  EXPECT_EQ(u.restore_ms, 1.5);  // left as it was
}

TEST(TurnUsageTest, SharedTokensAreTheKeptOnes) {
  TurnPlan plan;
  plan.match = MatchType::kDiverge;
  plan.n_keep = 7;
  api::Usage u;
  SetPromptUsage(plan, 3, api::CacheState::kResident, /*shared=*/true, &u);
  EXPECT_EQ(u.match, api::MatchType::kDiverge);
  EXPECT_EQ(u.shared_tokens, 7);
}

TEST(TurnUsageTest, ColdIsAMiss) {
  TurnPlan plan;
  plan.match = MatchType::kExtend;  // what the text matched; nothing was restored
  api::Usage u;
  SetPromptUsage(plan, 5, api::CacheState::kCold, /*shared=*/false, &u);
  EXPECT_EQ(u.match, api::MatchType::kMiss);
  EXPECT_EQ(u.prompt_tokens, 5);
  EXPECT_EQ(u.cached_tokens, 0);
}

}  // namespace
}  // namespace agentkv::sched
