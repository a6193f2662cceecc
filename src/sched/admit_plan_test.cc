#include "sched/admit_plan.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

TEST(AdmitPlanTest, NewAgentLooksForADonor) {
  const AdmitSteps s = PlanAdmit({});
  EXPECT_FALSE(s.wait);
  EXPECT_FALSE(s.fork_parent);
  EXPECT_FALSE(s.drop_cache);
  EXPECT_FALSE(s.mark_isolated);
  EXPECT_TRUE(s.try_donor);
}

TEST(AdmitPlanTest, AReturningAgentLooksForADonorAForkUsesItsSource) {
  // (SeedFromDonor then takes a donor only where it beats the agent's own cache.)
  EXPECT_TRUE(PlanAdmit({.has_tokens = true}).try_donor);
  EXPECT_TRUE(PlanAdmit({.has_tokens = true, .resident = true}).try_donor);
  EXPECT_FALSE(PlanAdmit({.is_fork = true}).try_donor);
  EXPECT_FALSE(PlanAdmit({.has_tokens = true, .is_fork = true}).try_donor);
  EXPECT_FALSE(PlanAdmit({.has_tokens = true, .isolated = true}).try_donor);
}

TEST(AdmitPlanTest, NoDonorWithoutCacheReuseOrWhenIsolated) {
  EXPECT_FALSE(PlanAdmit({.reuse_cache = false}).try_donor);
  const AdmitSteps s = PlanAdmit({.isolated = true});
  EXPECT_FALSE(s.try_donor);
  EXPECT_TRUE(s.mark_isolated);  // new: never a candidate nor a donor
  EXPECT_FALSE(PlanAdmit({.has_tokens = true, .isolated = true}).mark_isolated);  // it had a cache before
}

TEST(AdmitPlanTest, SubagentForksItsReadyParent) {
  const AdmitSteps s = PlanAdmit({.parent_ready = true});
  EXPECT_TRUE(s.fork_parent);
  EXPECT_FALSE(s.try_donor);  // the fork is its cache
  EXPECT_FALSE(PlanAdmit({.has_tokens = true, .parent_ready = true}).fork_parent);  // has its own
}

TEST(AdmitPlanTest, BusyWaitsAfterTheFork) {
  const AdmitSteps s = PlanAdmit({.busy = true, .parent_ready = true, .takes_over = true});
  EXPECT_TRUE(s.wait);
  EXPECT_TRUE(s.fork_parent);  // kept in the table meanwhile
  EXPECT_FALSE(s.drop_cache);  // decided again when it is admitted
  EXPECT_FALSE(s.try_donor);
}

TEST(AdmitPlanTest, TakingOverDropsTheCacheAndMayUseADonor) {
  const AdmitSteps resident = PlanAdmit({.has_tokens = true, .is_fork = true, .resident = true, .takes_over = true});
  EXPECT_TRUE(resident.drop_cache);
  EXPECT_TRUE(resident.clear_slot);
  EXPECT_TRUE(resident.try_donor);  // starts as a new agent's turn
  const AdmitSteps idle = PlanAdmit({.has_tokens = true, .takes_over = true});
  EXPECT_TRUE(idle.drop_cache);
  EXPECT_FALSE(idle.clear_slot);
  EXPECT_FALSE(PlanAdmit({.has_tokens = true, .takes_over = true, .isolated = true}).try_donor);
}

TEST(AdmitPlanTest, FailedAdmitUndoesWhatOnlyTheTurnMade) {
  const FailedAdmitUndo fork = PlanFailedAdmit({.owns_nothing = true, .slot_written = true, .is_fork = true});
  EXPECT_TRUE(fork.drop_fork);
  EXPECT_TRUE(fork.clear_slot);
  EXPECT_FALSE(fork.forget_leader_seq);
  const FailedAdmitUndo leader = PlanFailedAdmit({.from_leader = true, .owns_nothing = true});
  EXPECT_TRUE(leader.forget_leader_seq);
  EXPECT_FALSE(leader.clear_slot);  // nothing written
  EXPECT_FALSE(leader.drop_fork);
  // An agent with blocks of its own keeps its sequence and its entry.
  const FailedAdmitUndo owned = PlanFailedAdmit({.from_leader = true, .slot_written = true, .is_fork = true});
  EXPECT_FALSE(owned.forget_leader_seq);
  EXPECT_FALSE(owned.drop_fork);
  EXPECT_TRUE(owned.clear_slot);
}

// (An abandoned pipelined restore writes nothing after Abandon: its slot is
// cleared like any other, so there is no draining slot to keep.)
TEST(AdmitPlanTest, FailedAdmitNeverClearsAResidentSlot) {
  EXPECT_FALSE(PlanFailedAdmit({.resident = true, .slot_written = true}).clear_slot);
  EXPECT_TRUE(PlanFailedAdmit({.slot_written = true}).clear_slot);
}

}  // namespace
}  // namespace agentkv::sched
