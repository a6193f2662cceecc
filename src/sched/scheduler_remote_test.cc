// The scheduler and the remote tier (an in-memory RemoteStore, so no Redis is
// needed): an agent one server saved comes back `remote` on a server with an
// empty disk, equal to a cold prefill; an outage costs speed, never a request;
// the inference thread never calls the remote (the fixture's check).
#include <gtest/gtest.h>

#include "remote/mem_remote_store.h"
#include "remote/remote_tier.h"
#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

class SchedulerRemoteTest : public SchedulerTest {
 protected:
  // Boots a server over a cache dir of its own (`disk`), sharing remote_.
  void BootOn(const std::string& disk) {
    dir_ = base_dir_ / disk;
    Shutdown();
    engine::ContextOptions o;
    o.n_slots = 2;
    o.slot_ctx = 1024;
    o.n_threads = 2;
    auto ctx = engine::Context::Create(*model_, o);
    ASSERT_TRUE(ctx.ok());
    tier_ = std::make_unique<RemoteTier>(&remote_, (*ctx)->spec().fingerprint, (*ctx)->spec().KvTypesString());
    SchedulerOptions opt;
    opt.remote = tier_.get();
    Boot(2, 64u << 20, opt);
  }
  // The last turn's commit ran (an admin call runs on the inference thread,
  // after the iteration that finished the turn), its save landed and its push
  // ran.
  void Settle() {
    ASSERT_TRUE(sched_->ListAgents("default").ok());
    sched_->FlushSaves();
  }
  void TearDown() override {
    SchedulerTest::TearDown();
    dir_ = base_dir_;
    std::filesystem::remove_all(base_dir_);
  }
  void SetUp() override {
    SchedulerTest::SetUp();
    base_dir_ = dir_;
  }

  std::filesystem::path base_dir_;
  MemRemoteStore remote_;
  std::unique_ptr<RemoteTier> tier_;  // replaced per boot, after the scheduler that used it stopped
};

TEST_F(SchedulerRemoteTest, AnAgentMovesToAServerWithAnEmptyDisk) {
  BootOn("a");
  const std::string p1 = Prompt(3);
  auto t1 = Run("mover", p1, 8);
  EXPECT_EQ(t1->usage().cache_state, api::CacheState::kCold);
  Settle();
  EXPECT_EQ(tier_->counters().manifests_written.load(), 1u);

  BootOn("b");  // another server: nothing on its disk
  const std::string p2 = p1 + t1->text() + " and then";
  auto t2 = Run("mover", p2, 8);
  const api::Usage u = t2->usage();
  EXPECT_EQ(u.cache_state, api::CacheState::kRemote);
  EXPECT_GT(u.cached_tokens, 0);
  EXPECT_LT(u.tokens_prefilled, 20);
  EXPECT_EQ(tier_->counters().hits.load(), 1u);
  auto cold = Run("mover-cold", p2, 8);
  EXPECT_EQ(cold->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(t2->text(), cold->text());
  Settle();
  // Written through: B's own disk holds it now.
  EXPECT_TRUE(store_->GetSummary("default", "mover").ok());

  // On a third server, B's newer turn is what comes back.
  BootOn("c");
  auto t3 = Run("mover", p2 + t2->text(), 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kRemote);
  EXPECT_GT(t3->usage().cached_tokens, u.cached_tokens);
}

TEST_F(SchedulerRemoteTest, AStaleLocalCopyGivesWayToANewerRemoteTurn) {
  BootOn("a");
  const std::string p1 = Prompt(2);
  auto t1 = Run("agent", p1, 8);
  Settle();
  BootOn("b");  // the agent moves on: a newer turn, pushed
  const std::string p2 = p1 + t1->text() + " then";
  auto t2 = Run("agent", p2, 8);
  ASSERT_EQ(t2->usage().cache_state, api::CacheState::kRemote);
  Settle();
  BootOn("a");  // back on a (restarted): its disk holds turn 1, Redis turn 2
  const std::string p3 = p2 + t2->text() + " so";
  auto t3 = Run("agent", p3, 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kRemote);
  EXPECT_GT(t3->usage().cached_tokens, t2->usage().cached_tokens);
  auto cold = Run("agent-cold", p3, 8);
  EXPECT_EQ(t3->text(), cold->text());
  // Written through: a's disk now holds turn 2 or later (version ordered).
  Settle();
  BootOn("a");
  auto t4 = Run("agent", p3 + t3->text(), 8);
  EXPECT_EQ(t4->usage().cache_state, api::CacheState::kWarm);  // its own disk is newest now
}

TEST_F(SchedulerRemoteTest, AnOutageCostsSpeedNeverARequest) {
  BootOn("a");
  remote_.SetAvailable(false);
  auto t1 = Run("agent", Prompt(2), 8);  // fetch fails (cold), push fails
  EXPECT_EQ(t1->usage().cache_state, api::CacheState::kCold);
  Settle();
  EXPECT_GE(tier_->counters().errors.load(), 2u);
  EXPECT_NE(sched_->MetricsText().find("agentkv_remote_errors_total"), std::string::npos);
  EXPECT_TRUE(store_->GetSummary("default", "agent").ok());  // saved locally all the same

  remote_.SetAvailable(true);  // back: the next turn publishes the agent
  auto t2 = Run("agent", Prompt(2) + t1->text(), 8);
  EXPECT_NE(t2->usage().cache_state, api::CacheState::kCold);
  Settle();
  EXPECT_EQ(tier_->counters().manifests_written.load(), 1u);
  BootOn("b");
  auto t3 = Run("agent", Prompt(2) + t1->text() + t2->text(), 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kRemote);
}

TEST_F(SchedulerRemoteTest, ErasingAnAgentErasesItRemotely) {
  BootOn("a");
  Run("gone", Prompt(1), 4);
  Settle();
  ASSERT_EQ(tier_->counters().manifests_written.load(), 1u);
  ASSERT_TRUE(sched_->DeleteAgent("default", "gone", /*evict_only=*/false).ok());
  BootOn("b");
  auto t = Run("gone", Prompt(1), 4);
  EXPECT_EQ(t->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(tier_->counters().misses.load(), 1u);
}

}  // namespace
}  // namespace agentkv::sched
