// The scheduler and the remote tier (an in-memory RemoteStore, so no Redis is
// needed): an agent one server saved comes back `remote` on a server with an
// empty disk, equal to a cold prefill; an outage costs speed, never a request;
// the inference thread never calls the remote (the fixture's check).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

// Issue 14, "fetch missing blocks": an agent back on a server it was on
// before, whose newer turn another server pushed, takes the blocks this
// disk holds from it and fetches only the others (blocks are
// content-addressed); a local file that turns out corrupt is fetched
// instead; the reply equals a cold prefill's up to its first near-tie.
class SchedulerRemoteMissingTest : public SchedulerRemoteTest {
 protected:
  // Turn 1 on a, turn 2 (longer) on b, pushed; returns the prompt of turn 3.
  std::string MoveAndComeBack() {
    const std::string text = engine::testing::SampleText(12000);
    BootOn("a");
    const std::string p1 = text.substr(0, 1100);
    auto t1 = Run("agent", p1, 8);
    Settle();
    BootOn("b");
    const std::string p2 = p1 + t1->text() + text.substr(1100, 1800);
    auto t2 = Run("agent", p2, 8);
    EXPECT_EQ(t2->usage().cache_state, api::CacheState::kRemote);
    Settle();
    remote_rec_ = std::move(tier_->FetchManifest("default", "agent")).value();
    return p2 + t2->text() + " so";
  }
  // Blocks of the remote manifest a's disk (booted) holds, by id.
  uint32_t HeldOnA() {
    auto local = store_->GetRecord("default", "agent");
    EXPECT_TRUE(local.ok());
    uint32_t held = 0;
    for (const auto& b : remote_rec_.blocks) {
      for (const auto& l : local->blocks) held += l.id == b.id;
    }
    return held;
  }

  AgentRecord remote_rec_;
};

TEST_F(SchedulerRemoteMissingTest, OnlyTheBlocksTheDiskLacksAreFetched) {
  const std::string p3 = MoveAndComeBack();
  BootOn("a");
  const uint32_t held = HeldOnA();
  ASSERT_GE(held, 1u);  // turn 1's full blocks
  ASSERT_GE(remote_rec_.blocks.size(), held + 2);
  const uint64_t requested = remote_.blocks_requested();
  const SureText sure = GreedyTextBeforeNearTie(p3, 8, kTie);
  auto t3 = Run("agent", p3, 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kRemote);
  EXPECT_EQ(remote_.blocks_requested() - requested, remote_rec_.blocks.size() - held);
  EXPECT_EQ(tier_->counters().local_blocks.load(), held);
  EXPECT_GE(t3->usage().cached_tokens, static_cast<int64_t>(remote_rec_.tokens.size()) - 1);
  EXPECT_TRUE(t3->text().starts_with(sure.text)) << t3->text() << " vs " << sure.text;
  auto cold = Run("agent-cold", p3, 8);
  EXPECT_TRUE(cold->text().starts_with(sure.text)) << cold->text() << " vs " << sure.text;
  EXPECT_NE(sched_->MetricsText().find("agentkv_remote_local_blocks_total"), std::string::npos);
}

TEST_F(SchedulerRemoteMissingTest, ACorruptLocalBlockIsFetchedInstead) {
  const std::string p3 = MoveAndComeBack();
  BootOn("a");
  const uint32_t held = HeldOnA();
  ASSERT_GE(held, 1u);
  Shutdown();
  // Damage block 0's file on a's disk (held: it is turn 1's first block).
  int damaged = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(base_dir_ / "a")) {
    if (e.path().filename() != remote_rec_.blocks[0].id + ".safetensors") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(e.file_size() / 2));
    f.put('\x5a');
    f.seekp(static_cast<std::streamoff>(e.file_size() / 2 + 1));
    f.put('\xa5');
    ++damaged;
  }
  ASSERT_EQ(damaged, 1);
  BootOn("a");
  const uint64_t requested = remote_.blocks_requested();
  const SureText sure = GreedyTextBeforeNearTie(p3, 8, kTie);
  auto t3 = Run("agent", p3, 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kRemote);
  EXPECT_EQ(remote_.blocks_requested() - requested, remote_rec_.blocks.size() - held + 1);
  EXPECT_EQ(tier_->counters().local_blocks.load(), held - 1);
  EXPECT_GE(t3->usage().cached_tokens, static_cast<int64_t>(remote_rec_.tokens.size()) - 1);
  EXPECT_TRUE(t3->text().starts_with(sure.text)) << t3->text() << " vs " << sure.text;
}

TEST_F(SchedulerRemoteMissingTest, RemoteDownServesTheLocalCopyWarm) {
  const std::string p3 = MoveAndComeBack();
  BootOn("a");
  remote_.SetAvailable(false);
  auto t3 = Run("agent", p3, 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kWarm);  // turn 1, from a's disk
  EXPECT_GT(t3->usage().cached_tokens, 0);
  EXPECT_EQ(tier_->counters().bytes_read.load(), 0u);
}

// A read waits in the agent table while every slot is busy: it is used when a
// slot frees, not dropped and read again (then from the write-through on the
// local disk, reported `warm`: a double read, seen in bench/rolling_restart.py).
TEST_F(SchedulerRemoteTest, AReadWaitingForASlotIsNotReadAgain) {
  BootOn("a");
  const std::string p1 = Prompt(3);
  auto t1 = Run("mover", p1, 8);
  Settle();
  BootOn("b");  // 2 slots, both taken by resident agents whose next turns run while mover's read lands
  auto r1 = Run("busy1", Prompt(1), 4);
  auto r2 = Run("busy2", Prompt(2), 4);
  auto busy1 = Send("busy1", Prompt(1) + r1->text(), 48);
  auto busy2 = Send("busy2", Prompt(2) + r2->text(), 48);
  auto t2 = Send("mover", p1 + t1->text() + " and then", 8);
  busy1->Wait();
  busy2->Wait();
  t2->Wait();
  ASSERT_TRUE(t2->error().ok()) << t2->error().ToString();
  EXPECT_EQ(t2->usage().cache_state, api::CacheState::kRemote);
  EXPECT_EQ(tier_->counters().hits.load(), 1u);  // mover's (busy1/busy2 were misses)
}

}  // namespace
}  // namespace agentkv::sched
