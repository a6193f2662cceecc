// IoExecutor: FIFO jobs on one thread; Flush waits for what was posted; a
// niced executor runs its jobs (and the threads they start) at lower priority.
#include "sched/io_executor.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

int ThreadNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid())); }

TEST(IoExecutorTest, RunsJobsInOrderAndFlushWaitsForThem) {
  IoExecutor ex;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) ex.Post([&order, i] { order.push_back(i); });
  ex.Flush();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(ex.Pending(), 0u);
}

TEST(IoExecutorTest, NicedExecutorRunsJobsAndTheirThreadsAtLowerPriority) {
  const int base = ThreadNice();
  if (base + 5 > 19) GTEST_SKIP() << "already at nice " << base;
  IoExecutor ex(5);
  std::atomic<int> job_nice{-100}, child_nice{-100};
  ex.Post([&] {
    job_nice = ThreadNice();
    std::thread([&] { child_nice = ThreadNice(); }).join();
  });
  ex.Flush();
  EXPECT_EQ(job_nice.load(), base + 5);
  EXPECT_EQ(child_nice.load(), base + 5);  // inherited by threads a save starts
  EXPECT_EQ(ThreadNice(), base);            // the caller's own priority is untouched
  IoExecutor plain;
  std::atomic<int> plain_nice{-100};
  plain.Post([&] { plain_nice = ThreadNice(); });
  plain.Flush();
  EXPECT_EQ(plain_nice.load(), base);
}

}  // namespace
}  // namespace agentkv::sched
