// Admission (issue 29, finding 11): the order in which waiting requests get
// a slot (round-robin across tenants, not FIFO), and what a request that
// ends in the queue leaves behind (no phantom fork).

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

// A sink whose deltas block the inference thread (the scheduler calls sinks
// from it) until the test allows them: while it holds, the scheduler's state
// cannot change, so a test can queue requests behind a known turn.
class GatedSink : public RecordingSink {
 public:
  void OnDelta(std::string_view text) override {
    RecordingSink::OnDelta(text);
    std::unique_lock<std::mutex> l(gate_mu_);
    ++arrived_;
    gate_cv_.notify_all();
    gate_cv_.wait(l, [&] { return arrived_ <= allowed_; });
  }
  // Lets the first `n` deltas through.
  void Allow(int n) {
    std::lock_guard<std::mutex> l(gate_mu_);
    allowed_ = n;
    gate_cv_.notify_all();
  }
  // Returns once `n` deltas have arrived (the n-th one holding, if not allowed).
  void WaitArrived(int n) {
    std::unique_lock<std::mutex> l(gate_mu_);
    gate_cv_.wait(l, [&] { return arrived_ >= n; });
  }

 private:
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  int arrived_ = 0;
  int allowed_ = 0;
};

// One slot; tenant "a" runs a turn and queues four more, then tenant "b"
// queues one. Under FIFO b's request waited for a's whole backlog (with 32
// queued and long turns, past the queue timeout); now it is admitted as soon
// as a's running turn ends, before a's next request.
TEST_F(SchedulerTest, AnotherTenantsRequestIsAdmittedBeforeOneTenantsBacklogDrains) {
  Boot(1);
  auto running = std::make_shared<GatedSink>();
  ASSERT_TRUE(sched_->Submit(TenantRequest("a", "a0", Prompt(0), 24), running).ok());
  running->WaitArrived(1);  // a0 holds the slot, and the inference thread
  std::vector<std::shared_ptr<RecordingSink>> backlog;
  for (int i = 1; i <= 4; ++i) {
    backlog.push_back(Send(TenantRequest("a", "a" + std::to_string(i), Prompt(i), 4)));
  }
  auto other = Send(TenantRequest("b", "b1", Prompt(5), 4));
  // Their agents' disk reads (Submit starts them) done, so that each is
  // admissible as soon as a slot is free: only the order decides.
  while (Metric("agentkv_io_pending") != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  running->Allow(1 << 20);
  running->Wait();
  other->Wait();
  for (auto& s : backlog) s->Wait();
  ASSERT_TRUE(other->error().ok()) << other->error().ToString();
  for (auto& s : backlog) ASSERT_TRUE(s->error().ok()) << s->error().ToString();
  EXPECT_LT(other->started_at(), backlog[0]->started_at()) << "b waited behind a's backlog";
  for (size_t i = 1; i < backlog.size(); ++i) {
    EXPECT_LT(backlog[i - 1]->started_at(), backlog[i]->started_at()) << "a's own order, request " << i;
  }
}

// A subagent's request forks its parent's cache as soon as it is tried; one
// cancelled while it waits for a slot left that fork behind: an agent that
// never ran, holding the parent's whole sequence (listed with the parent's
// tokens, matchable implicitly, never trimmed). It is dropped now.
TEST_F(SchedulerTest, ACancelledSubagentLeavesNoForkBehind) {
  Boot(1);
  auto parent = Run("parent", Prompt(0), 8);
  auto blocker = std::make_shared<GatedSink>();
  ASSERT_TRUE(sched_->Submit(Request("blocker", Prompt(1), 64), blocker).ok());
  blocker->WaitArrived(1);  // the slot is the blocker's
  api::GenerationRequest child = Request("child", Prompt(0) + parent->text() + " And the child?", 8);
  child.parent_agent_id = "parent";
  api::CancellationToken cancel;
  child.cancel = cancel;
  auto child_sink = Send(std::move(child));
  // One decode step at a time until the child has been tried (it is then in
  // the agent table: a fork of the parent, waiting for the slot).
  int step = 1;
  while (Metric("agentkv_agent_table_agents") < 3 && !blocker->done() && step < 60) {
    blocker->Allow(step);
    blocker->WaitArrived(++step);
  }
  ASSERT_EQ(Metric("agentkv_agent_table_agents"), 3.0) << "the child was never tried while the slot was busy";
  cancel.Cancel();
  blocker->Allow(1 << 20);
  child_sink->Wait();
  EXPECT_EQ(child_sink->error().code(), StatusCode::kCancelled) << child_sink->error().ToString();
  blocker->Wait();
  Result<api::AgentInfo> phantom = sched_->GetAgent("default", "child");
  EXPECT_EQ(phantom.status().code(), StatusCode::kNotFound)
      << "a phantom child of " << (phantom.ok() ? phantom->tokens : 0) << " tokens";
  auto listed = sched_->ListAgents("default");
  ASSERT_TRUE(listed.ok());
  for (const auto& a : *listed) EXPECT_NE(a.id, "child");
  // The child's next request still forks its parent.
  api::GenerationRequest again = Request("child", Prompt(0) + parent->text() + " And the child?", 8);
  again.parent_agent_id = "parent";
  auto forked = Run(std::move(again));
  EXPECT_GT(forked->usage().cached_tokens, 0);
}

// The same for an implicit request's fork (a DIVERGE from another agent's
// cache): cancelled while it waits for the slot, it leaves no agent behind.
TEST_F(SchedulerTest, ACancelledImplicitForkLeavesNoAgentBehind) {
  Boot(1);
  const std::string text = Prompt(2);
  Run("original", text, 8);
  auto blocker = std::make_shared<GatedSink>();
  ASSERT_TRUE(sched_->Submit(Request("blocker", Prompt(1), 64), blocker).ok());
  blocker->WaitArrived(1);
  api::GenerationRequest diverging = Request("", text.substr(0, text.size() * 4 / 5) + " but then nothing at all", 8);
  api::CancellationToken cancel;
  diverging.cancel = cancel;
  auto sink = Send(std::move(diverging));
  int step = 1;
  while (Metric("agentkv_agent_table_agents") < 3 && !blocker->done() && step < 60) {
    blocker->Allow(step);
    blocker->WaitArrived(++step);
  }
  ASSERT_EQ(Metric("agentkv_agent_table_agents"), 3.0) << "the implicit request never forked while the slot was busy";
  cancel.Cancel();
  blocker->Allow(1 << 20);
  sink->Wait();
  EXPECT_EQ(sink->error().code(), StatusCode::kCancelled) << sink->error().ToString();
  blocker->Wait();
  auto listed = sched_->ListAgents("default");
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> ids;
  for (const auto& a : *listed) ids.push_back(a.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"blocker", "original"}));
}

}  // namespace
}  // namespace agentkv::sched
