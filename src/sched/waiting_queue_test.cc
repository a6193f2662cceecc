#include "sched/waiting_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sched/test_sink.h"

namespace agentkv::sched {
namespace {

using Clock = std::chrono::steady_clock;

struct Queued {
  std::shared_ptr<testing::RecordingSink> sink = std::make_shared<testing::RecordingSink>();
  api::CancellationToken cancel;
};

Queued Push(WaitingQueue& q, const std::string& ns, const std::string& id, Clock::time_point received) {
  Queued out;
  auto w = std::make_unique<WaitingTurn>();
  w->req.namespace_id = ns;
  w->req.agent_id = id;
  w->req.cancel = out.cancel;
  w->sink = out.sink;
  w->received = received;
  q.entries()->push_back(std::move(w));
  return out;
}

TEST(WaitingQueueTest, ExpireEndsTheCancelledAndTheTimedOutAndKeepsTheRest) {
  WaitingQueue q;
  SchedulerMetrics metrics;
  const auto now = Clock::now();
  Queued fresh = Push(q, "t", "fresh", now - std::chrono::milliseconds(10));
  Queued old = Push(q, "t", "old", now - std::chrono::milliseconds(2000));
  Queued gone = Push(q, "u", "gone", now);
  gone.cancel.Cancel();
  const std::vector<AgentKey> ended = q.Expire(now, /*timeout_ms=*/1000, metrics);
  EXPECT_EQ(ended, (std::vector<AgentKey>{{"t", "old"}, {"u", "gone"}}));  // queue order
  EXPECT_EQ(old.sink->error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(gone.sink->error().code(), StatusCode::kCancelled);
  EXPECT_TRUE(fresh.sink->error().ok());
  EXPECT_EQ(q.size(), 1u);
  EXPECT_TRUE(q.Wants({"t", "fresh"}));
  EXPECT_FALSE(q.Wants({"t", "old"}));
  const std::string text = metrics.Render({});
  EXPECT_NE(text.find("agentkv_requests_total{outcome=\"cancelled\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("agentkv_requests_total{outcome=\"error\"} 1"), std::string::npos) << text;
}

// Requests are queued once their prompt is prepared, which takes longer for
// some (a new agent's whole prompt) than for others: the queue goes by when
// they reached the server, equal times in queue order.
TEST(WaitingQueueTest, OrderByArrivalGoesByWhenRequestsReachedTheServer) {
  WaitingQueue q;
  const auto t0 = Clock::now();
  const auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  Push(q, "t", "returning-1", at(5));
  Push(q, "t", "returning-2", at(9));
  Push(q, "t", "new", at(1));  // arrived first, prepared last
  Push(q, "t", "same-time-a", at(9));
  Push(q, "t", "same-time-b", at(9));
  q.OrderByArrival();
  std::vector<std::string> order;
  for (const auto& w : *q.entries()) order.push_back(w->req.agent_id);
  EXPECT_EQ(order, (std::vector<std::string>{"new", "returning-1", "returning-2", "same-time-a", "same-time-b"}));
}

TEST(WaitingQueueTest, AdmitRoundRobinAlternatesTenantsAndRemovesOnlyWhatWasTaken) {
  WaitingQueue q;
  const auto now = Clock::now();
  for (const char* id : {"a1", "a2", "a3"}) Push(q, "a", id, now);
  Push(q, "b", "b1", now);
  std::vector<std::string> tried;
  // Tenant a runs one turn already: b's request goes first, then a's in their order.
  const size_t taken = q.AdmitRoundRobin({{"a", 1}}, [&](WaitingTurn& w) {
    tried.push_back(w.req.agent_id);
    return w.req.agent_id != "a2";  // a2's agent is busy: it keeps waiting
  });
  EXPECT_EQ(taken, 3u);
  EXPECT_EQ(tried, (std::vector<std::string>{"b1", "a1", "a2", "a3"}));
  EXPECT_EQ(q.Keys(), (std::set<AgentKey>{{"a", "a2"}}));
  EXPECT_EQ(q.AdmitRoundRobin({}, [](WaitingTurn&) { return false; }), 0u);
  EXPECT_EQ(q.size(), 1u);
}

TEST(WaitingQueueTest, FailAllTellsEverySinkAndEmptiesTheQueue) {
  WaitingQueue q;
  Queued a = Push(q, "t", "a", Clock::now()), b = Push(q, "t", "b", Clock::now());
  q.FailAll(Status::Unavailable("server shutting down"));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(a.sink->error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(b.sink->error().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace agentkv::sched
