#include "engine/compute_team.h"

#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace agentkv::engine {

bool BindComputeTeamToCpus(int n_threads) {
#if defined(_OPENMP) && defined(__linux__)
  if (n_threads <= 1 || std::getenv("OMP_PROC_BIND") != nullptr) return false;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
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
