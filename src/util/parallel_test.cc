#include "util/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

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

}  // namespace
}  // namespace agentkv
