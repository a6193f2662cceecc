#include "api/worker_pool.h"

#include <atomic>
#include <future>
#include <new>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

// A burst of long jobs must not leave a later job queued while the pool may
// still grow (httplib's ThreadPool did: /health waited behind idle
// connections).
TEST(WorkerPoolTest, LaterJobRunsWhileEarlierOnesBlock) {
  WorkerPool pool(2, 256, std::chrono::milliseconds(200));
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.enqueue([released] { released.wait(); }));
  std::promise<void> ran;
  ASSERT_TRUE(pool.enqueue([&ran] { ran.set_value(); }));
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(2)), std::future_status::ready);
  release.set_value();
  pool.shutdown();
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(WorkerPoolTest, BoundedAndShrinksToMin) {
  WorkerPool pool(1, 4, std::chrono::milliseconds(50));
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.enqueue([&, released] { released.wait(); ++done; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(pool.threads(), 4u);  // at most max_threads
  release.set_value();
  for (int i = 0; i < 200 && pool.threads() > 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(done.load(), 10);  // queued jobs ran once threads freed
  EXPECT_EQ(pool.threads(), 1u);
  pool.shutdown();
  EXPECT_FALSE(pool.enqueue([] {}));
}

// Issue 29: std::bad_alloc out of one connection's job used to terminate
// the process; the pool keeps serving.
TEST(WorkerPoolTest, AThrowingJobDoesNotEndThePool) {
  WorkerPool pool(1, 1, std::chrono::milliseconds(200));
  ASSERT_TRUE(pool.enqueue([] { throw std::bad_alloc(); }));
  ASSERT_TRUE(pool.enqueue([] { throw 42; }));
  std::promise<void> ran;
  ASSERT_TRUE(pool.enqueue([&ran] { ran.set_value(); }));
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  pool.shutdown();
}

}  // namespace
}  // namespace agentkv::api
