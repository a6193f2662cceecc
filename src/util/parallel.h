#pragma once
// ParallelFor: runs fn(0) .. fn(n-1) on up to n_threads threads (the caller's
// thread is one of them) and returns when all have finished. For bulk copies
// on the inference thread while the compute threads are idle (KV restore and
// export): each index must touch memory no other index touches.
// n_threads <= 1 or n <= 1 runs everything on the caller's thread. The other
// threads may run on any of the process's CPUs, also when the caller is bound
// to one (util/cpu_affinity.h).

#include <cstddef>
#include <functional>

namespace agentkv {

void ParallelFor(size_t n, int n_threads, const std::function<void(size_t)>& fn);

}  // namespace agentkv
