#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "util/cpu_affinity.h"

namespace agentkv {

WorkerTeam& WorkerTeam::ForThisThread() {
  thread_local std::unique_ptr<WorkerTeam> team(new WorkerTeam());
  return *team;
}

WorkerTeam::~WorkerTeam() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void WorkerTeam::Launch(size_t n_workers, const std::function<void(size_t)>* fn) {
  while (threads_.size() < n_workers) {
    const size_t id = threads_.size();
    threads_.emplace_back([this, id] {
      RunOnAnyProcessCpu();  // not the one CPU a bound caller would pass on
      Loop(id);
    });
  }
  {
    MutexLock lock(&mu_);
    if (running_ != 0) {  // a contract violation that would corrupt the running job: fail loudly
      std::fprintf(stderr, "agentkv: WorkerTeam::Launch while a job runs (call Wait first)\n");
      std::abort();
    }
    job_ = fn;
    wanted_ = n_workers;
    running_ = n_workers;
    ++generation_;
  }
  wake_.NotifyAll();
}

void WorkerTeam::Wait() {
  MutexLock lock(&mu_);
  while (running_ != 0) done_.Wait(&lock);
}

void WorkerTeam::Loop(size_t id) {
  uint64_t seen = 0;  // a worker started for a job has not run it yet
  MutexLock lock(&mu_);
  for (;;) {
    while (!stop_ && generation_ == seen) wake_.Wait(&lock);
    if (stop_) return;
    seen = generation_;
    if (id >= wanted_) continue;  // not needed for this job
    const std::function<void(size_t)>* fn = job_;
    lock.Unlock();
    (*fn)(id);
    lock.Lock();
    if (--running_ == 0) done_.NotifyAll();
  }
}

void ParallelFor(size_t n, int n_threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(1, n_threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  const std::function<void(size_t)> work = [&](size_t) {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  WorkerTeam& team = WorkerTeam::ForThisThread();
  team.Launch(workers - 1, &work);
  work(0);
  team.Wait();
}

}  // namespace agentkv
