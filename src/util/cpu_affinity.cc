#include "util/cpu_affinity.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace agentkv {

const std::vector<int>& ProcessCpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> out;
#if defined(__linux__)
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &mask)) out.push_back(c);
      }
    }
#endif
    return out;
  }();
  return cpus;
}

namespace {
// Read during static initialization, on the main thread, before any thread
// could have bound itself.
[[maybe_unused]] const bool kCapturedAtStart = !ProcessCpus().empty();
}  // namespace

void RunOnAnyProcessCpu() {
#if defined(__linux__)
  const std::vector<int>& cpus = ProcessCpus();
  if (cpus.empty()) return;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus) CPU_SET(c, &mask);
  sched_setaffinity(0, sizeof(mask), &mask);
#endif
}

}  // namespace agentkv
