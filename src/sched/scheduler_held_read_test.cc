// While one agent's disk read is held at a gated file system (the read
// blocks until the test opens the gate, so nothing here passes by luck and a
// slow machine only makes it slower): /metrics and the admin listing answer,
// and a turn cancelled while it waits for that read ends without it as
// another agent keeps decoding at its pace (the CPU route: the restore has
// not begun; the pipelined route's abandon is tested in scheduler_test.cc).
// Latencies are printed; the assertions rest on the gate, not on time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "sched/scheduler_fixture.h"
#include "store/gated_file_system_test_util.h"

namespace agentkv::sched {
namespace {

using std::chrono::seconds;
using store_test::GatedFileSystem;
using Clock = testing::RecordingSink::Clock;

using SchedulerHeldReadTest = SchedulerTest;

constexpr auto kGiveUp = seconds(30);

bool WaitHeld(GatedFileSystem& fs) {
  for (int i = 0; i < 3000 && fs.held() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fs.held() > 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Agent W returns after a restart; its block reads are held. The metrics
// text and the namespace's admin listing are answered meanwhile (a call that
// waited for the read would still wait when the test gives up, 30 s, and
// opens the gate); their latency is printed and bounded generously (the
// issue's 50 ms, with 10x headroom for a loaded 2-core machine). Both
// restore routes: the CPU's (W waits for its read off the loop) and the
// pipelined one, a GPU's default, whose gated first decode runs on the loop
// and must give way to the calls (it once held them until the read ended).
class SchedulerHeldReadRouteTest : public SchedulerTest, public ::testing::WithParamInterface<bool> {};

TEST_P(SchedulerHeldReadRouteTest, MetricsAndAdminCallsAnswerWhileALoadIsHeld) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  const std::string w1 = Prompt(4) + Prompt(5);
  SchedulerOptions route;
  route.pipelined_restore = GetParam();
  const std::string first = SaveAgentThenRestart("w", w1, &fs, route);  // W is on disk only
  fs.Close("/blocks/", "");
  auto w = Send("w", w1 + first + " Then", 8);
  ASSERT_TRUE(WaitHeld(fs)) << "W's read never reached the disk";
  auto calls = std::async(std::launch::async, [&] {
    const auto start = Clock::now();
    const std::string metrics = sched_->MetricsText();
    auto list = sched_->ListAgents("default");
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    const bool listed = list.ok() && std::any_of(list->begin(), list->end(),
                                                 [](const api::AgentInfo& a) { return a.id == "w"; });
    return std::make_pair(metrics.find("agentkv_") != std::string::npos && listed, ms);
  });
  const bool answered = calls.wait_for(kGiveUp) == std::future_status::ready;
  EXPECT_TRUE(answered) << "/metrics or the admin listing waited for a held load";
  EXPECT_GT(fs.held(), 0) << "the load was held all along";
  EXPECT_FALSE(w->done());
  fs.Open();
  const auto [ok, ms] = calls.get();
  EXPECT_TRUE(ok) << "metrics text or listing without agent w";
  std::printf("metrics + admin list during a held load (%s route): %.2f ms\n", GetParam() ? "pipelined" : "plain", ms);
  EXPECT_LT(ms, 500.0);
  w->Wait();
  ASSERT_TRUE(w->error().ok()) << w->error().ToString();
  EXPECT_EQ(w->usage().cache_state, api::CacheState::kWarm);
}

// The server stops while W's read is held: the inference loop ends W's
// turn (an error, not the read's result) without waiting for the read, on
// both routes. Stop itself then flushes the I/O queue (write-behind saves
// must land; the held read is in that queue), so it returns once the gate
// opens: a disk's read ends, this gate does not.
TEST_P(SchedulerHeldReadRouteTest, StopEndsTheTurnWhileItsLoadIsHeld) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  const std::string w1 = Prompt(4) + Prompt(5);
  SchedulerOptions route;
  route.pipelined_restore = GetParam();
  const std::string first = SaveAgentThenRestart("w", w1, &fs, route);
  fs.Close("/blocks/", "");
  auto w = Send("w", w1 + first + " Then", 8);
  ASSERT_TRUE(WaitHeld(fs)) << "W's read never reached the disk";
  auto stopped = std::async(std::launch::async, [&] { sched_->Stop(); });
  EXPECT_TRUE(w->WaitFor(kGiveUp)) << "the stop waited for the held load to end W's turn";
  EXPECT_FALSE(w->error().ok());
  EXPECT_GT(fs.held(), 0) << "the load was held all along";
  fs.Open();
  stopped.wait();
}

INSTANTIATE_TEST_SUITE_P(Routes, SchedulerHeldReadRouteTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Pipelined" : "Plain"; });

// Agent B decodes a long reply; agent W's turn waits for its read, held at
// the disk, and is cancelled. W ends while its read is still held, B goes on
// producing tokens (32 counted while the gate is closed: a loop that waited
// for the read would produce none). B's median gaps before and after the
// cancel are printed, not asserted: on a shared 2-core machine other
// processes moved them 2-8x either way between runs (22 -> 33 ms, 51 -> 6 ms),
// so a wall-time bound would flake; the gate is what makes this test fail.
// Released, W's read is dropped; W then restores warm.
TEST_F(SchedulerHeldReadTest, ACancelledHeldRestoreNeverHoldsUpAnotherAgent) {
  GatedFileSystem& fs = *MakeFileSystem<GatedFileSystem>();
  const std::string w1 = Prompt(4) + Prompt(5);
  const std::string first = SaveAgentThenRestart("w", w1, &fs);  // W is on disk only
  auto b = Send("b", Prompt(3), 400);
  b->WaitForDeltas(16);
  ASSERT_FALSE(b->done());
  fs.Close("/blocks/", "");
  api::CancellationToken cancel;
  const std::string w2 = w1 + first + " Then";
  auto w = Send("w", w2, 8, {}, cancel);
  ASSERT_TRUE(WaitHeld(fs)) << "W's read never reached the disk";
  const auto cancelled_at = Clock::now();
  cancel.Cancel();
  const bool ended = w->WaitFor(kGiveUp);
  EXPECT_TRUE(ended) << "the cancelled turn waited for its read";
  EXPECT_EQ(w->error().code(), StatusCode::kCancelled) << w->error().ToString();
  const auto count = [&] { return b->DeltasBetween(Clock::time_point::min(), Clock::time_point::max()); };
  const int at_cancel = b->DeltasBetween(Clock::time_point::min(), cancelled_at);
  for (int i = 0; i < 3000 && ended && count() < at_cancel + 32 && !b->done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(count(), at_cancel + 32) << "B stalled behind the cancelled turn's read";
  EXPECT_GT(fs.held(), 0) << "the read was held all along";
  std::vector<double> before, after;
  {
    const std::vector<Clock::time_point> t = b->delta_times();
    for (size_t i = 1; i < t.size(); ++i) {
      (t[i - 1] < cancelled_at ? before : after)
          .push_back(std::chrono::duration<double, std::milli>(t[i] - t[i - 1]).count());
    }
  }
  fs.Open();
  b->Wait();
  ASSERT_TRUE(b->error().ok()) << b->error().ToString();
  ASSERT_GE(before.size(), 8u);
  ASSERT_GE(after.size(), 8u);
  std::printf("B's inter-token gap: median %.2f ms before the cancel, median %.2f ms after it (%zu gaps)\n",
              Median(before), Median(after), after.size());
  auto w3 = Run("w", w2, 8);  // restorable as before
  EXPECT_EQ(w3->usage().cache_state, api::CacheState::kWarm);
}

}  // namespace
}  // namespace agentkv::sched
