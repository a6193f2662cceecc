// The scheduler and the disk: the inference thread never waits on I/O.
// A file system whose reads or writes are held at a gate shows that other
// agents keep computing (deterministically: the gate stays closed until the
// test has seen them finish), and that a full disk loses no turn.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "sched/scheduler_fixture.h"
#include "store/fault_file_system.h"
#include "store/gated_file_system_test_util.h"

namespace agentkv::sched {
namespace {

using std::chrono::seconds;

using store_test::GatedFileSystem;

using SchedulerIoTest = SchedulerTest;

// W's read was held at the gate all along: releases it; W then restores warm.
void ReleaseAndExpectWarm(GatedFileSystem& fs, testing::RecordingSink& w) {
  EXPECT_FALSE(w.done());
  EXPECT_GT(fs.held(), 0);
  fs.Open();
  w.Wait();
  ASSERT_TRUE(w.error().ok()) << w.error().ToString();
  EXPECT_EQ(w.usage().cache_state, api::CacheState::kWarm);
}

// Agent W returns after a restart while its block reads are held: agent A's
// whole request runs meanwhile; once the reads go through, W restores warm
// and answers exactly like a cold prefill of the same text (16 greedy tokens).
TEST_F(SchedulerIoTest, AWarmLoadNeverHoldsUpAnotherAgent) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  const std::string w1 = Prompt(4) + Prompt(5);
  const std::string first = SaveAgentThenRestart("w", w1, &fs);  // W is on disk only
  ASSERT_TRUE(sched_->ListAgents("default").ok());
  fs.Close("/blocks/", "");
  const std::string w2 = w1 + first + " Then";
  auto w = Send("w", w2, 16);
  auto a = Send("a", Prompt(1), 24);
  ASSERT_TRUE(a->WaitFor(seconds(120))) << "agent A waited for W's disk read";
  EXPECT_TRUE(a->error().ok());
  ReleaseAndExpectWarm(fs, *w);
  EXPECT_GT(w->usage().cached_tokens, 100);
  auto cold = Run(TenantRequest("oracle", "cold", w2, 16));  // (in "default" it would start from W's cache)
  EXPECT_EQ(cold->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(w->text(), cold->text());
}

// After a restart, agent W's read is held at the disk (its manifest: every
// read hangs) and its namespace's index was never read: a brand-new agent is
// admitted and answers meanwhile. The store's in-memory index says it has no
// manifest, so it needs no read and does not queue behind W's. W then
// restores warm.
TEST_F(SchedulerIoTest, ANewAgentIsAdmittedWithoutARead) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  const std::string w1 = Prompt(4);
  const std::string first = SaveAgentThenRestart("w", w1, &fs);  // W is on disk only, no index merged
  fs.Close("/", "");
  auto w = Send("w", w1 + first + " Then", 8);
  for (int i = 0; i < 1000 && fs.held() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(fs.held(), 0);
  auto fresh = Send("new", Prompt(1), 8);
  const bool answered = fresh->WaitFor(seconds(60));
  EXPECT_TRUE(answered) << "a new agent waited for another agent's read";
  EXPECT_TRUE(fresh->error().ok()) << fresh->error().ToString();
  EXPECT_EQ(fresh->usage().cache_state, api::CacheState::kCold);
  ReleaseAndExpectWarm(fs, *w);
}

// While agent S's save is held at the disk, S's next turn (restored from
// RAM: its blocks stay there until the save lands), a brand-new agent and an
// agent evicted from its slot all run to completion.
TEST_F(SchedulerIoTest, HeldSavesDelayNoTurn) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  Boot(1, 64u << 20, {}, 1024, &fs);
  ASSERT_TRUE(sched_->ListAgents("default").ok());  // the namespace's index is read
  fs.Close("", "/");  // every write hangs
  auto s1 = Run("s", Prompt(2), 8);
  auto fresh = Send("new", Prompt(3), 8);  // evicts s from the single slot
  ASSERT_TRUE(fresh->WaitFor(seconds(120))) << "a new agent waited for a save";
  EXPECT_EQ(fresh->usage().cache_state, api::CacheState::kCold);
  auto s2 = Send("s", Prompt(2) + s1->text() + " And", 8);
  ASSERT_TRUE(s2->WaitFor(seconds(120))) << "a returning agent waited for its own save";
  ASSERT_TRUE(s2->error().ok()) << s2->error().ToString();
  EXPECT_EQ(s2->usage().cache_state, api::CacheState::kHot);
  EXPECT_EQ(s2->usage().match, api::MatchType::kExtend);
  EXPECT_GT(fs.held(), 0);
  fs.Open();
  sched_->FlushSaves();
}

// A full disk: every save fails with ENOSPC and the RAM pool is too small to
// hold every agent. No request fails, no turn is lost: each agent's newest
// turn stays in RAM and its next turn extends it, equal to a cold prefill.
TEST_F(SchedulerIoTest, AFullDiskLosesNoTurn) {
  FaultInjectingFileSystem& fs = *MakeFileSystem<FaultInjectingFileSystem>(DefaultFileSystem());
  fs.SetNoSpaceAfterBytes(0);
  Boot(1, 2u << 20, {}, 1024, &fs);
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    auto r = Run("full" + std::to_string(i), Prompt(i), 8);
    texts.push_back(Prompt(i) + r->text() + " Yes");
  }
  for (int i = 0; i < 3; ++i) {
    auto again = Run("full" + std::to_string(i), texts[i], 16);
    EXPECT_NE(again->usage().cache_state, api::CacheState::kCold) << i;
    EXPECT_EQ(again->usage().match, api::MatchType::kExtend) << i;
    auto cold = Run("fullcold" + std::to_string(i), texts[i], 16);
    EXPECT_EQ(again->text(), cold->text()) << i;
  }
  EXPECT_GT(fs.CountOps("append"), 0u);
  auto agents = sched_->ListAgents("default");  // also: the last turn is committed (after its reply)
  ASSERT_TRUE(agents.ok());
  for (const auto& info : *agents) {
    EXPECT_NE(info.tier, api::CacheState::kWarm) << info.id << " is not on disk";
    EXPECT_EQ(info.disk_bytes, 0) << info.id;
  }
  sched_->FlushSaves();
  const std::string metrics = sched_->MetricsText();
  EXPECT_NE(metrics.find("agentkv_unsaved_agents 6"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("agentkv_save_failures_total 0"), std::string::npos);
}

// The disk answers EIO: block reads fail (the returning agent is served cold,
// equal to a cold prefill, nothing is counted as corruption nor quarantined),
// then block writes fail (turns are served, saves fail and are counted). Once
// the disk recovers, the agent loads warm again after a restart.
TEST_F(SchedulerIoTest, EioIsServedAndCounted) {
  FaultInjectingFileSystem& fs = *MakeFileSystem<FaultInjectingFileSystem>(DefaultFileSystem());
  Boot(1, 64u << 20, {}, 1024, &fs);
  auto t1 = Run("eio", Prompt(1), 8);
  const std::string next = Prompt(1) + t1->text() + " And";
  ASSERT_TRUE(sched_->ListAgents("default").ok());  // the turn is committed
  sched_->FlushSaves();
  Boot(1, 64u << 20, {}, 1024, &fs);  // restart: the agent is on disk only
  fs.FailOps("read", "/blocks/");
  auto t2 = Run("eio", next, 8);
  EXPECT_EQ(t2->usage().cache_state, api::CacheState::kCold);
  auto cold = Run("eiocold", next, 8);
  EXPECT_EQ(t2->text(), cold->text());
  fs.FailOps("append", "/blocks/");
  auto w = Run("eiowrite", Prompt(2), 8);
  ASSERT_TRUE(sched_->ListAgents("default").ok());
  sched_->FlushSaves();
  std::string metrics = sched_->MetricsText();
  EXPECT_NE(metrics.find("agentkv_corruption_events_total 0"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("agentkv_read_failures_total 0"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("agentkv_save_failures_total 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("agentkv_disk_out_of_space_total 0"), std::string::npos) << metrics;
  fs.FailOps("", "");
  Boot(1, 64u << 20, {}, 1024, &fs);
  auto t3 = Run("eio", next, 8);
  EXPECT_EQ(t3->usage().cache_state, api::CacheState::kWarm) << "an I/O error must not destroy the cache";
  EXPECT_EQ(t3->text(), cold->text());
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find("quarantine/"), std::string::npos) << e.path();
  }
}

// A disk that holds about two agents (no --cache-disk budget): every request
// is served, saves that do not fit evict the least recently used agents
// (counted in /metrics), and after a restart the newest agents are warm and
// answer as a cold prefill does.
TEST_F(SchedulerIoTest, AFullDiskEvictsTheLeastRecentlyUsed) {
  FaultInjectingFileSystem& fs = *MakeFileSystem<FaultInjectingFileSystem>(DefaultFileSystem());
  Boot(1, 64u << 20, {}, 1024, &fs);
  std::vector<std::string> next;
  for (int i = 0; i < 5; ++i) {
    const std::string prompt = engine::testing::SampleText(4000).substr(static_cast<size_t>(i) * 700, 400);
    auto r = Run("full" + std::to_string(i), prompt, 8);
    next.push_back(prompt + r->text() + " Yes");
    ASSERT_TRUE(sched_->ListAgents("default").ok());  // runs after the turn's commit: its save is posted
    sched_->FlushSaves();
    if (i == 0) fs.SetCapacityBytes(fs.used_bytes() * 5 / 2);  // room for ~2 agents of this size
  }
  const std::string metrics = sched_->MetricsText();
  EXPECT_EQ(metrics.find("agentkv_disk_evictions_total{reason=\"no_space\"} 0"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("agentkv_disk_out_of_space_total 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("agentkv_save_failures_total 0"), std::string::npos) << "a save that fits after an eviction is no failure\n" << metrics;
  Boot(1, 64u << 20, {}, 1024, &fs);
  auto last = Run("full4", next[4], 8);
  EXPECT_EQ(last->usage().cache_state, api::CacheState::kWarm);
  auto cold = Run("full4cold", next[4], 8);
  EXPECT_EQ(last->text(), cold->text());
  auto first = Run("full0", next[0], 8);
  EXPECT_EQ(first->usage().cache_state, api::CacheState::kCold) << "the oldest agent was evicted for space";
}

// Admin calls read a namespace's manifests from disk once (on their own
// thread); after that the agent table answers.
TEST_F(SchedulerIoTest, ANamespaceIndexIsReadOnce) {
  FaultInjectingFileSystem& fs = *MakeFileSystem<FaultInjectingFileSystem>(DefaultFileSystem());
  Boot(1, 64u << 20, {}, 1024, &fs);
  Run("indexed", Prompt(0), 4);
  sched_->FlushSaves();
  Boot(1, 64u << 20, {}, 1024, &fs);  // restart: the agent is on disk only
  const size_t at_start = fs.CountOps("read", "/agents/");
  auto first = sched_->ListAgents("default");
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].id, "indexed");
  EXPECT_EQ((*first)[0].tier, api::CacheState::kWarm);
  EXPECT_GT((*first)[0].disk_bytes, 0);
  const size_t after_first = fs.CountOps("read", "/agents/");
  EXPECT_GT(after_first, at_start);
  ASSERT_TRUE(sched_->ListAgents("default").ok());
  ASSERT_TRUE(sched_->GetAgent("default", "indexed").ok());
  EXPECT_EQ(fs.CountOps("read", "/agents/"), after_first);
}

}  // namespace
}  // namespace agentkv::sched
