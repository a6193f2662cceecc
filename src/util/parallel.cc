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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
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
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ != 0) {  // a contract violation that would corrupt the running job: fail loudly
      std::fprintf(stderr, "agentkv: WorkerTeam::Launch while a job runs (call Wait first)\n");
      std::abort();
    }
    job_ = fn;
    wanted_ = n_workers;
    running_ = n_workers;
    ++generation_;
  }
  wake_.notify_all();
}

void WorkerTeam::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return running_ == 0; });
}

void WorkerTeam::Loop(size_t id) {
  uint64_t seen = 0;  // a worker started for a job has not run it yet
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (id >= wanted_) continue;  // not needed for this job
    const std::function<void(size_t)>* fn = job_;
    lock.unlock();
    (*fn)(id);
    lock.lock();
    if (--running_ == 0) done_.notify_all();
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
