// AgentTiers::FindIdleDonor without a store: the idle agent of the
// namespace whose text shares the longest prefix with a prompt.
#include <gtest/gtest.h>

#include "sched/agent_tiers.h"

namespace agentkv::sched {
namespace {

class FindIdleDonorTest : public ::testing::Test {
 protected:
  FindIdleDonorTest()
      : pool_(BlockPoolOptions{.budget_bytes = 1 << 20}),
        tiers_(pool_, nullptr, nullptr, metrics_, 1 << 20, 1 << 20, nullptr, false, nullptr, [] {}) {}

  Agent& Add(const std::string& ns, const std::string& id, const std::string& text, int slot = -1) {
    Agent& a = tiers_.table().GetOrAdd({ns, id});
    a.seq.text = text;
    a.seq.tokens.assign(text.size(), 1);
    a.slot = slot;
    tiers_.table().Reindex(a);
    return a;
  }

  SchedulerMetrics metrics_;
  BlockPool pool_;
  AgentTiers tiers_;
};

TEST_F(FindIdleDonorTest, TheLongestCommonPrefixInTheNamespace) {
  Add("ns", "short", "You are");
  Add("ns", "long", "You are a helpful", /*slot=*/1);
  Add("other", "longer", "You are a helpful assistant");
  Agent& fresh = tiers_.table().GetOrAdd({"ns", "new"});
  IdleDonor donor;
  const Agent* found = tiers_.FindIdleDonor(fresh, "You are a helpful assistant. Hi", &donor);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->key.agent_id, "long");
  EXPECT_EQ(donor.common_bytes, 17u);
  EXPECT_EQ(donor.text_bytes, 17u);
  EXPECT_TRUE(donor.in_ram);  // in a slot
}

TEST_F(FindIdleDonorTest, NeverItselfNorABusyAgent) {
  Agent& self = Add("ns", "self", "You are a helpful");
  IdleDonor donor;
  EXPECT_EQ(tiers_.FindIdleDonor(self, "You are a helpful assistant", &donor), nullptr);
  Agent& fresh = tiers_.table().GetOrAdd({"ns", "new"});
  const Agent* found = tiers_.FindIdleDonor(fresh, "You are a helpful assistant", &donor);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->key.agent_id, "self");
  EXPECT_FALSE(donor.in_ram);  // neither resident nor in the pool: on disk (or remote) only
  // The longest match turned busy (before its Reindex): none is offered.
  Add("ns", "busy", "You are a helpful assistant").busy = true;
  EXPECT_EQ(tiers_.FindIdleDonor(fresh, "You are a helpful assistant", &donor), nullptr);
  EXPECT_EQ(tiers_.FindIdleDonor(fresh, "Something else", &donor), nullptr);
}

// A waiting agent seeded from a donor (a fork that has not run) holds the
// donor's sequence but no cache of its own: it is never offered (the second
// wave of a team used to fork such agents and prefill cold).
TEST_F(FindIdleDonorTest, NeverAForkThatHasNotRun) {
  Add("ns", "donor", "You are a helpful");
  Agent& seeded = Add("ns", "seeded", "You are a helpful assistant");  // its source's text, say longer
  seeded.fork_source = AgentKey{"ns", "donor"};
  tiers_.table().Reindex(seeded);
  Agent& fresh = tiers_.table().GetOrAdd({"ns", "new"});
  IdleDonor donor;
  const Agent* found = tiers_.FindIdleDonor(fresh, "You are a helpful assistant", &donor);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->key.agent_id, "donor");
  seeded.fork_source.reset();  // it ran: its cache is its own
  tiers_.table().Reindex(seeded);
  found = tiers_.FindIdleDonor(fresh, "You are a helpful assistant", &donor);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->key.agent_id, "seeded");
}

}  // namespace
}  // namespace agentkv::sched
