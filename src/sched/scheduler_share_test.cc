// Prefix donors (sched/prefix_donor.h, issue 32): a new agent starts from
// another agent's cache of the same prompt prefix in its namespace, and
// agents that arrive together with the same new prefix prefill it once.

#include <gtest/gtest.h>

#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

// A shared system text of ~2K bytes (well above kMinSharedPrefixBytes) and
// per-agent tasks from other parts of the corpus.
std::string SharedText() { return engine::testing::SampleText(9000).substr(0, 2200); }
std::string Task(int i) { return " Task: " + engine::testing::SampleText(9000).substr(3000 + 400 * i, 240); }

TEST_F(SchedulerTest, ANewAgentStartsFromAnotherAgentsCacheOfTheSamePrefix) {
  Boot(2);
  // A task whose greedy reply has 3+ tokens before a near-tie, so that the
  // oracle below compares something (deterministic for this model).
  std::string prompt_b;
  SureText sure;
  for (int i = 1; i < 12 && sure.tokens < 3; ++i) {
    prompt_b = SharedText() + Task(i);
    sure = GreedyTextBeforeNearTie(prompt_b, 16, kTie);
  }
  ASSERT_GE(sure.tokens, 3) << "every candidate task has an early near-tie";
  auto a = Run("coder", SharedText() + Task(0), 16);
  EXPECT_EQ(a->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(a->usage().shared_tokens, 0);
  auto b = Run("reviewer", prompt_b, 16);
  const api::Usage u = b->usage();
  EXPECT_EQ(u.agent_id, "reviewer");
  EXPECT_NE(u.cache_state, api::CacheState::kCold);
  EXPECT_EQ(u.match, api::MatchType::kDiverge);
  EXPECT_GT(u.cached_tokens, u.prompt_tokens / 2) << "the shared text is not prefilled again";
  EXPECT_EQ(u.shared_tokens, u.cached_tokens);
  // Oracle: the reply equals a cold prefill's up to the first near-tie.
  EXPECT_TRUE(b->text().starts_with(sure.text)) << b->text() << " vs " << sure.text;
  // The donor is untouched: its next turn extends its own text, from its own cache.
  auto a2 = Run("coder", SharedText() + Task(0) + a->text() + " And then?", 8);
  EXPECT_EQ(a2->usage().match, api::MatchType::kExtend);
  EXPECT_EQ(a2->usage().shared_tokens, 0);
  // The seeded agent's next turn is its own extension.
  auto b2 = Run("reviewer", prompt_b + b->text() + " More.", 8);
  EXPECT_EQ(b2->usage().match, api::MatchType::kExtend);
  EXPECT_EQ(b2->usage().shared_tokens, 0);
  // Its blocks of the shared text are the donor's, held once in the pool.
  auto info = sched_->GetAgent("default", "reviewer");
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->shared_ram_bytes, 0);
  EXPECT_LT(info->shared_ram_bytes, info->ram_bytes);
  const std::string metrics = sched_->MetricsText();
  EXPECT_NE(metrics.find("agentkv_shared_prefix_hits_total{source="), std::string::npos) << metrics;
}

TEST_F(SchedulerTest, NoDonorAcrossNamespacesNorForOrFromIsolatedRequests) {
  Boot(2);
  Run(TenantRequest("team-a", "coder", SharedText() + Task(0)));
  // Another namespace: cold, whatever team-a holds.
  auto other = Run(TenantRequest("team-b", "coder2", SharedText() + Task(1)));
  EXPECT_EQ(other->usage().cached_tokens, 0);
  EXPECT_EQ(other->usage().cache_state, api::CacheState::kCold);
  // An isolated request (explicit id) is never seeded ...
  api::GenerationRequest iso = TenantRequest("team-a", "sealed", SharedText() + Task(2));
  iso.isolated = true;
  auto sealed = Run(iso);
  EXPECT_EQ(sealed->usage().cached_tokens, 0);
  // ... nor is an isolated request's agent ever a donor.
  api::GenerationRequest iso2 = TenantRequest("team-c", "sealed2", SharedText() + Task(3));
  iso2.isolated = true;
  Run(iso2);
  auto open = Run(TenantRequest("team-c", "open", SharedText() + Task(4)));
  EXPECT_EQ(open->usage().cached_tokens, 0) << "seeded from an isolated request's agent";
}

TEST_F(SchedulerTest, DeletingTheDonorNeverBreaksAnAgentSeededFromIt) {
  Boot(1, 64u << 20);  // one slot: the agents' caches go through the pool and the disk
  auto a = Run("donor", SharedText() + Task(0), 8);
  auto b = Run("seeded", SharedText() + Task(1), 8);
  ASSERT_GT(b->usage().shared_tokens, 0);
  sched_->FlushSaves();
  ASSERT_TRUE(sched_->DeleteAgent("default", "donor", /*evict_only=*/false).ok());
  auto b2 = Run("seeded", SharedText() + Task(1) + b->text() + " Next.", 8);
  EXPECT_EQ(b2->usage().match, api::MatchType::kExtend);
  EXPECT_GT(b2->usage().cached_tokens, b->usage().prompt_tokens / 2);
  // After a restart too (its blocks are on disk under its own manifest).
  sched_->FlushSaves();
  Boot(1, 64u << 20);
  auto b3 = Run("seeded", SharedText() + Task(1) + b->text() + " Next." + b2->text() + " Again.", 8);
  EXPECT_EQ(b3->usage().match, api::MatchType::kExtend);
  EXPECT_EQ(b3->usage().cache_state, api::CacheState::kWarm);
}

TEST_F(SchedulerTest, AfterARestartANewAgentStartsFromADonorOnDisk) {
  Boot(2);
  Run("donor", SharedText() + Task(0), 8);
  sched_->FlushSaves();
  Boot(2);
  // The first request of the namespace posts its index read and is not held
  // for it; later ones find the donor on disk.
  Run("first", Task(5), 4);
  std::shared_ptr<RecordingSink> b;
  for (int i = 0; i < 50; ++i) {
    b = Run("new-" + std::to_string(i), SharedText() + Task(1), 4);
    if (b->usage().shared_tokens > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(b);
  EXPECT_GT(b->usage().shared_tokens, b->usage().prompt_tokens / 2);
  EXPECT_EQ(b->usage().cache_state, api::CacheState::kWarm);
}

// A returning agent whose own cache shares less of its prompt than another
// agent's (its system text changed to the team's) starts from the donor's
// cache; one whose own cache shares as much keeps restoring its own.
TEST_F(SchedulerTest, AReturningAgentStartsFromADonorThatSharesMoreThanItsOwnCache) {
  Boot(2);
  std::string prompt_r;
  SureText sure;
  for (int i = 1; i < 12 && sure.tokens < 3; ++i) {
    prompt_r = SharedText() + Task(i);
    sure = GreedyTextBeforeNearTie(prompt_r, 16, kTie);
  }
  ASSERT_GE(sure.tokens, 3) << "every candidate task has an early near-tie";
  // Its first turn had another system text: its own cache shares ~nothing with the team's prompt.
  auto r0 = Run("returning", Task(7) + Task(8), 8);
  ASSERT_EQ(r0->usage().cache_state, api::CacheState::kCold);
  Run("donor", SharedText() + Task(0), 8);
  auto r1 = Run("returning", prompt_r, 16);
  const api::Usage u = r1->usage();
  EXPECT_NE(u.cache_state, api::CacheState::kCold);
  EXPECT_GT(u.shared_tokens, u.prompt_tokens / 2) << "the team's text was prefilled again";
  EXPECT_EQ(u.shared_tokens, u.cached_tokens);
  // Oracle: the reply equals a cold prefill's up to the first near-tie.
  EXPECT_TRUE(r1->text().starts_with(sure.text)) << r1->text() << " vs " << sure.text;
  // Its next turn extends its own (seeded) cache, not the donor's again.
  auto r2 = Run("returning", prompt_r + r1->text() + " More.", 8);
  EXPECT_EQ(r2->usage().match, api::MatchType::kExtend);
  EXPECT_EQ(r2->usage().shared_tokens, 0);
  EXPECT_GT(r2->usage().cached_tokens, u.prompt_tokens);
  // The donor is untouched.
  auto d2 = Run("donor", SharedText() + Task(0) + " And then?", 4);
  EXPECT_EQ(d2->usage().shared_tokens, 0);
  EXPECT_GT(d2->usage().cached_tokens, d2->usage().prompt_tokens / 2);
}

// An isolated agent is never seeded, even when returning with the team's text.
TEST_F(SchedulerTest, AReturningIsolatedAgentIsNeverSeeded) {
  Boot(2);
  api::GenerationRequest first = TenantRequest("team-a", "sealed", Task(7) + Task(8));
  first.isolated = true;
  Run(first);
  Run(TenantRequest("team-a", "donor", SharedText() + Task(0)));
  api::GenerationRequest again = TenantRequest("team-a", "sealed", SharedText() + Task(2));
  again.isolated = true;
  auto sealed = Run(again);
  EXPECT_EQ(sealed->usage().shared_tokens, 0);
  EXPECT_LT(sealed->usage().cached_tokens, sealed->usage().prompt_tokens / 4) << "seeded from another agent";
}

// Eight agents arrive together with the same new prefix: one computes it,
// the others copy it from its slot once it has (counted in /metrics).
TEST_F(SchedulerTest, AgentsArrivingTogetherPrefillTheirSharedPrefixOnce) {
  Boot(4);
  engine::Tokenizer tok(*model_);
  const std::string shared = engine::testing::SampleText(12000).substr(0, 3200);
  const size_t shared_tokens = tok.Tokenize(shared, true).tokens.size();
  const double before = Metric("agentkv_tokens_prefilled_total");
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  size_t own_tokens = 0;
  for (int i = 0; i < 8; ++i) {
    own_tokens += tok.Tokenize(Task(i), false).tokens.size() + 2;  // + a merge at the seam
    sinks.push_back(Send("member-" + std::to_string(i), shared + Task(i), 4));
  }
  int64_t shared_total = 0;
  for (auto& s : sinks) {
    s->Wait();
    ASSERT_TRUE(s->error().ok()) << s->error().ToString();
    shared_total += s->usage().shared_tokens;
  }
  const double prefilled = Metric("agentkv_tokens_prefilled_total") - before;
  EXPECT_LE(prefilled, static_cast<double>(shared_tokens + own_tokens)) << "the shared prefix was computed twice";
  EXPECT_GE(shared_total, static_cast<int64_t>(7 * (shared_tokens - 64)));
  // The copies give the same answers as a cold prefill (up to the first near-tie).
  for (int i : {1, 7}) {
    const SureText sure = GreedyTextBeforeNearTie(shared + Task(i), 4, kTie);
    EXPECT_TRUE(sinks[i]->text().starts_with(sure.text)) << i << ": " << sinks[i]->text() << " vs " << sure.text;
  }
}

}  // namespace
}  // namespace agentkv::sched
