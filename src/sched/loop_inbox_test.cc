#include "sched/loop_inbox.h"

#include <gtest/gtest.h>

#include <thread>

namespace agentkv::sched {
namespace {

using namespace std::chrono_literals;

TEST(LoopInboxTest, PushedItemsArriveInOrderAndARefusalKeepsTheItem) {
  LoopInbox<int> inbox;
  auto admit = [](bool closed) { return closed ? Status::Unavailable("closed") : Status::OK(); };
  for (int i = 0; i < 3; ++i) {
    auto item = std::make_unique<int>(i);
    ASSERT_TRUE(inbox.Push(&item, admit).ok());
    EXPECT_EQ(item, nullptr);
  }
  auto refused = std::make_unique<int>(9);
  EXPECT_EQ(inbox.Push(&refused, [](bool) { return Status::ResourceExhausted("full"); }).code(),
            StatusCode::kResourceExhausted);
  ASSERT_NE(refused, nullptr);
  std::deque<std::unique_ptr<int>> out;
  EXPECT_TRUE(inbox.Wait(1000ms, false, &out));
  ASSERT_EQ(out.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*out[static_cast<size_t>(i)], i);
  // Closed: pushes are refused by `admit` (it sees closed), Wait says stop.
  inbox.Close();
  EXPECT_TRUE(inbox.closed());
  EXPECT_EQ(inbox.Push(&refused, admit).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(inbox.Wait(1000ms, false, &out));
  inbox.Open();
  EXPECT_TRUE(inbox.Push(&refused, admit).ok());
}

TEST(LoopInboxTest, TasksAndWakeUpsEndAWaitEarly) {
  LoopInbox<int> inbox;
  std::deque<std::unique_ptr<int>> out;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread poster([&] {
    std::this_thread::sleep_for(20ms);
    inbox.Post([] {});
  });
  EXPECT_TRUE(inbox.Wait(60s, false, &out));
  poster.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "the task did not wake the loop";
  EXPECT_EQ(inbox.TakeTasks().size(), 1u);
  EXPECT_TRUE(inbox.TakeTasks().empty());
  std::thread waker([&] {
    std::this_thread::sleep_for(20ms);
    inbox.Wake();
  });
  EXPECT_TRUE(inbox.Wait(60s, false, &out));
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s) << "the wake-up did not wake the loop";
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace agentkv::sched
