#include "engine/compute_team.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <vector>

#include "util/cpu_affinity.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace agentkv::engine {

bool BindComputeTeamToCpus(int n_threads) {
#if defined(_OPENMP) && defined(__linux__)
  if (n_threads <= 1 || std::getenv("OMP_PROC_BIND") != nullptr) return false;
  const std::vector<int>& cpus = ProcessCpus();
  if (cpus.size() < static_cast<size_t>(n_threads)) return false;
  bool bound = true;
  // The same team size as ggml's regions, so that libgomp reuses these threads.
#pragma omp parallel num_threads(n_threads) reduction(&& : bound)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[omp_get_thread_num()], &one);
    bound = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  }
  return bound;
#else
  (void)n_threads;
  return false;
#endif
}

}  // namespace agentkv::engine
