// Each committed turn reaches the disk with a higher version than the one
// before, across a restart too, so the store's stale-save check
// (AgentStore::SaveAgent) protects the scheduler's write-behind.

#include <chrono>
#include <thread>

#include "sched/scheduler_fixture.h"
#include "store/agent_store.h"

namespace agentkv::sched {
namespace {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The agent's version on disk once it exceeds `above` (0 if it never does
// within 30 s): a turn's save is queued after its reply, so the test waits
// for it instead of assuming it is queued when Run returns.
uint64_t SavedVersionAbove(AgentStore* store, Scheduler* sched, uint64_t above) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    sched->FlushSaves();
    if (auto s = store->GetSummary("default", "a"); s.ok() && s->version > above) return s->version;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return 0;
}

TEST_F(SchedulerTest, EachTurnIsSavedWithAHigherVersionAcrossRestarts) {
  Boot(1);
  const int64_t start_ms = UnixMs();
  const std::string p1 = Prompt(1);
  auto t1 = Run("a", p1, 6);
  const uint64_t v1 = SavedVersionAbove(store_.get(), sched_.get(), 0);
  EXPECT_GE(v1, static_cast<uint64_t>(start_ms));  // the commit time, not a save counter

  const std::string p2 = p1 + t1->text() + " And";
  auto t2 = Run("a", p2, 6);
  const uint64_t v2 = SavedVersionAbove(store_.get(), sched_.get(), v1);
  EXPECT_GT(v2, v1);

  Boot(1);  // restart: the version comes back from the manifest
  Run("a", p2 + t2->text() + " But", 6);
  EXPECT_GT(SavedVersionAbove(store_.get(), sched_.get(), v2), v2);
  EXPECT_EQ(store_->GetRecord("default", "a")->version, store_->GetSummary("default", "a")->version);
}

}  // namespace
}  // namespace agentkv::sched
