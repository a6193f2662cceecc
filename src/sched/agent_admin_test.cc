// AgentAdmin over AgentTiers without a store: what each call reports and
// what it asks of the inference thread (here the calling thread).
#include "sched/agent_admin.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

class AgentAdminTest : public ::testing::Test {
 protected:
  AgentAdminTest()
      : pool_(BlockPoolOptions{.budget_bytes = 1 << 20}),
        tiers_(pool_, nullptr, nullptr, metrics_, 1 << 20, 1 << 20, nullptr, false, nullptr, [] {}),
        admin_(
            tiers_, /*slot_bytes_per_token=*/100,
            [this](std::function<void()> task) {
              ++tasks_;
              task();
            },
            [this](Agent& a) {
              left_.push_back(a.key.agent_id);
              a.slot = -1;
            }) {}

  Agent& Add(const std::string& id, int tokens, int slot = -1) {
    Agent& a = tiers_.table().GetOrAdd({"ns", id});
    a.seq.tokens.assign(static_cast<size_t>(tokens), 1);
    a.slot = slot;
    return a;
  }

  SchedulerMetrics metrics_;
  BlockPool pool_;
  AgentTiers tiers_;
  AgentAdmin admin_;
  int tasks_ = 0;
  std::vector<std::string> left_;
};

TEST_F(AgentAdminTest, ListsTheNamespacesAgentsWithTheirTiers) {
  Add("b", 3, /*slot=*/0);
  Add("a", 2);
  tiers_.table().GetOrAdd({"other", "c"});
  auto list = admin_.List("ns");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, "a");
  EXPECT_EQ((*list)[0].tier, api::CacheState::kCold);
  EXPECT_EQ((*list)[1].id, "b");
  EXPECT_EQ((*list)[1].tier, api::CacheState::kResident);
  EXPECT_EQ((*list)[1].ram_bytes, 300);  // a slot-only agent: its tokens at the slot's bytes per token
  EXPECT_EQ(tasks_, 1);                   // the table is read on the loop
}

TEST_F(AgentAdminTest, GetFindsAKnownAgentOnlyInItsNamespace) {
  Add("a", 2);
  auto a = admin_.Get("ns", "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->tokens, 2);
  EXPECT_EQ(admin_.Get("other", "a").status().code(), StatusCode::kNotFound);
}

TEST_F(AgentAdminTest, DeleteRefusesABusyAgentAndAnUnknownOne) {
  Add("a", 2).busy = true;
  EXPECT_EQ(admin_.Delete("ns", "a", false).code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tiers_.table().Find({"ns", "a"}), nullptr);
  EXPECT_EQ(admin_.Delete("ns", "nobody", false).code(), StatusCode::kNotFound);
  EXPECT_EQ(admin_.Delete("ns", "../x", false).code(), StatusCode::kInvalidArgument);
}

TEST_F(AgentAdminTest, EvictFreesTheSlotAndKeepsTheAgentDeleteErasesIt) {
  Add("a", 2, /*slot=*/1);
  EXPECT_TRUE(admin_.Delete("ns", "a", /*evict_only=*/true).ok());
  EXPECT_EQ(left_, std::vector<std::string>{"a"});
  ASSERT_NE(tiers_.table().Find({"ns", "a"}), nullptr);
  EXPECT_TRUE(admin_.Delete("ns", "a", /*evict_only=*/false).ok());
  EXPECT_EQ(tiers_.table().Find({"ns", "a"}), nullptr);
  EXPECT_EQ(left_.size(), 1u);  // no slot any more: nothing to leave
  EXPECT_FALSE(tiers_.Erasing({"ns", "a"}));
}

}  // namespace
}  // namespace agentkv::sched
