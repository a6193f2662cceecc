#include "util/parallel.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
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

}  // namespace
}  // namespace agentkv
