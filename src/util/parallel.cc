#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "util/cpu_affinity.h"

namespace agentkv {

void ParallelFor(size_t n, int n_threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(1, n_threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) {
    threads.emplace_back([&] {
      RunOnAnyProcessCpu();  // not the one CPU a bound caller would pass on
      work();
    });
  }
  work();
  for (auto& t : threads) t.join();
}

}  // namespace agentkv
