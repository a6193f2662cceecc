#include "util/parallel.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "util/cpu_affinity.h"

namespace agentkv {
namespace {

TEST(ParallelForTest, RunsEveryIndexExactlyOnce) {
  for (int threads : {0, 1, 2, 7}) {
    for (size_t n : {0u, 1u, 5u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      ParallelFor(n, threads, [&](size_t i) { hits[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " threads=" << threads;
    }
  }
}

// A caller bound to one CPU (the inference thread, engine/compute_team.h)
// does not pass that CPU on: the other threads may run on every CPU the
// process had at start.
TEST(ParallelForTest, WorkersOfABoundCallerRunOnEveryProcessCpu) {
  const std::vector<int>& cpus = ProcessCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  std::vector<int> worker_cpu_counts;
  std::thread caller([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    const pthread_t self = pthread_self();
    std::mutex mu;
    ParallelFor(16, 4, [&](size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // every thread gets items
      if (pthread_equal(pthread_self(), self)) return;
      cpu_set_t mask;
      ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask), 0);
      std::lock_guard<std::mutex> lock(mu);
      worker_cpu_counts.push_back(CPU_COUNT(&mask));
    });
  });
  caller.join();
  ASSERT_FALSE(worker_cpu_counts.empty());
  for (int n : worker_cpu_counts) EXPECT_EQ(n, static_cast<int>(cpus.size()));
}

// The workers stay between calls: a second call runs on the threads of the
// first (none started anew), growing the team only when asked for more.
TEST(WorkerTeamTest, WorkersAreKeptBetweenCallsAndGrowOnDemand) {
  std::thread caller([] {
    auto ids_of = [](size_t n, int threads) {
      std::mutex mu;
      std::set<std::thread::id> ids;
      ParallelFor(n, threads, [&](size_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // every thread gets items
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      });
      ids.erase(std::this_thread::get_id());
      return ids;
    };
    const auto first = ids_of(32, 4);
    EXPECT_EQ(first.size(), 3u);
    EXPECT_EQ(ids_of(32, 4), first);
    const auto fewer = ids_of(32, 2);
    EXPECT_EQ(fewer.size(), 1u);
    EXPECT_TRUE(first.count(*fewer.begin()));
    const auto more = ids_of(64, 6);
    EXPECT_EQ(more.size(), 5u);
    for (auto id : first) EXPECT_TRUE(more.count(id));
  });
  caller.join();
}

// Launch returns at once: the caller works beside the workers (as
// RowCopyPipeline's caller reads while they write); a worker may itself use
// ParallelFor (its own team).
TEST(WorkerTeamTest, LaunchRunsBesideTheCallerAndWorkersMayNest) {
  WorkerTeam& team = WorkerTeam::ForThisThread();
  std::atomic<bool> caller_ran{false};
  std::vector<std::atomic<int>> hits(3 * 100);
  const std::function<void(size_t)> job = [&](size_t w) {
    while (!caller_ran.load()) std::this_thread::yield();  // needs the caller to run meanwhile
    ParallelFor(100, 3, [&](size_t i) { hits[w * 100 + i].fetch_add(1); });
  };
  for (int round = 0; round < 3; ++round) {
    caller_ran = false;
    for (auto& h : hits) h = 0;
    team.Launch(3, &job);
    caller_ran = true;
    team.Wait();
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round << " item " << i;
  }
}

}  // namespace
}  // namespace agentkv
