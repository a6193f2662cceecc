// Explicit parents (a subagent's, from coding agents' headers) and the
// reported stop string: the scheduler side of issue 13's identity work.

#include <gtest/gtest.h>

#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

// Like the fixture's Run, with a parent.
std::shared_ptr<RecordingSink> RunChild(Scheduler& sched, const std::string& agent, const std::string& parent,
                                        const std::string& prompt) {
  api::GenerationRequest r;
  r.namespace_id = "default";
  r.agent_id = agent;
  r.parent_agent_id = parent;
  r.kind = api::RequestKind::kCompletion;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 12;
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_TRUE(sched.Submit(r, sink).ok());
  sink->Wait();
  EXPECT_TRUE(sink->error().ok()) << sink->error().ToString();
  return sink;
}

TEST_F(SchedulerTest, NewChildForksFromItsParentsCache) {
  Boot(2);
  // A parent prompt and a child prompt extending it whose greedy reply starts
  // with 3+ tokens before a near-tie, so the oracle below compares something
  // (chosen among candidates, deterministically for this model).
  std::string shared, child_prompt;
  SureText sure;
  for (int i = 0; i < 5 && sure.tokens < 3; ++i) {
    for (const char* ask : {" The child asks something else entirely.", " What did the committee decide next?",
                            " Then the old man said that", " It was the first time that the"}) {
      shared = Prompt(i);
      child_prompt = shared + ask;
      sure = GreedyTextBeforeNearTie(child_prompt, 12, kTie);
      if (sure.tokens >= 3) break;
    }
  }
  ASSERT_GE(sure.tokens, 3) << "every candidate child prompt has an early near-tie";
  auto parent1 = Run("parent", shared, 12);
  auto child = RunChild(*sched_, "child", "parent", child_prompt);
  const api::Usage u = child->usage();
  EXPECT_EQ(u.agent_id, "child");
  EXPECT_NE(u.cache_state, api::CacheState::kCold);
  EXPECT_GT(u.cached_tokens, u.prompt_tokens / 2);  // the parent's prompt, not prefilled again
  // Oracle: the same text in a cold agent gives the same tokens, up to the
  // first near-tie (the cold agent prefills it all in one batch shape, the
  // child only its new text: scheduler_test.cc's file comment).
  auto cold = Run("cold", child_prompt, 12);
  EXPECT_EQ(cold->usage().cache_state, api::CacheState::kCold);
  EXPECT_TRUE(child->text().starts_with(sure.text)) << child->text() << " vs " << sure.text;
  EXPECT_TRUE(cold->text().starts_with(sure.text)) << cold->text() << " vs " << sure.text;
  // The parent is untouched: its next turn extends its own text.
  auto parent2 = Run("parent", shared + parent1->text() + " And then?", 12);
  EXPECT_EQ(parent2->usage().match, api::MatchType::kExtend);
  // A parent only matters when the child is new: the child's second turn is
  // its own extension.
  auto child2 = RunChild(*sched_, "child", "parent", child_prompt + child->text() + " More.");
  EXPECT_EQ(child2->usage().match, api::MatchType::kExtend);
}

TEST_F(SchedulerTest, UnknownParentMeansAColdStart) {
  Boot(1);
  auto child = RunChild(*sched_, "orphan", "no-such-parent", Prompt(1));
  EXPECT_EQ(child->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(child->usage().cached_tokens, 0);
}

TEST_F(SchedulerTest, UsageNamesTheStopStringThatEndedTheReply) {
  Boot(1);
  const std::string free_run = Run("f", Prompt(0), 24)->text();
  ASSERT_GT(free_run.size(), 12u);
  const std::string stop = free_run.substr(8, 3);
  auto s = Send("g", Prompt(0), 24, {"never-appears", stop});
  s->Wait();
  EXPECT_EQ(s->reason(), api::FinishReason::kStop);
  EXPECT_EQ(s->usage().stop_sequence, stop);
  EXPECT_EQ(Run("h", Prompt(0), 4)->usage().stop_sequence, "");  // length
}

}  // namespace
}  // namespace agentkv::sched
