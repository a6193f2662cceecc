#pragma once
// ParallelFor: runs fn(0) .. fn(n-1) on up to n_threads threads (the caller's
// thread is one of them) and returns when all have finished. For bulk copies
// on the inference thread while the compute threads are idle (KV restore and
// export), and a load's block-file readers: each index must touch memory no
// other index touches.
// n_threads <= 1 or n <= 1 runs everything on the caller's thread. The other
// threads are the caller's WorkerTeam: they may run on any of the process's
// CPUs, also when the caller is bound to one (util/cpu_affinity.h).

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace agentkv {

void ParallelFor(size_t n, int n_threads, const std::function<void(size_t)>& fn);

// The threads a thread hands bulk work to, kept between calls: starting 16-32
// threads per restore, export or load cost ~1 ms (32 threads on the 2-core
// VM: 0.9-1.2 ms before the last one ran), every time. Workers are started on
// first need (growing to the largest count asked), run on any process CPU,
// and park on a condition variable between jobs.
//
// Thread safety: a team belongs to the thread that got it from
// ForThisThread(); only that thread may Launch and Wait, one job at a time.
// A worker that calls ParallelFor uses a team of its own.
class WorkerTeam {
 public:
  // The calling thread's team (created on first use, joined when the thread ends).
  static WorkerTeam& ForThisThread();
  ~WorkerTeam();

  // Starts fn(w) for each w in [0, n_workers) on team threads (not the
  // caller) and returns at once. REQUIRES no job running (Wait() first);
  // fn must stay valid until Wait() returns.
  void Launch(size_t n_workers, const std::function<void(size_t)>* fn);
  // Returns once every worker of the last Launch has returned from fn.
  void Wait();

 private:
  WorkerTeam() = default;
  void Loop(size_t id);

  Mutex mu_;
  CondVar wake_;  // a job was launched, or stop
  CondVar done_;  // the last worker of a job finished
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // one per Launch
  size_t wanted_ GUARDED_BY(mu_) = 0;        // workers [0, wanted_) run the job
  size_t running_ GUARDED_BY(mu_) = 0;       // of those, not yet finished
  const std::function<void(size_t)>* job_ GUARDED_BY(mu_) = nullptr;
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // the caller's only
};

}  // namespace agentkv
