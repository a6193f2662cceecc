#pragma once
// IoExecutor: one background thread that runs disk jobs (the scheduler has
// one for reads, one for saves) in FIFO order, so that file I/O never runs on
// the inference thread.
//
// Thread safety: Post/Flush/Pending may be called from any thread. Jobs run
// one at a time on the executor's thread. The destructor finishes every
// queued job (no save is dropped) and joins.

#include <deque>
#include <functional>
#include <thread>

#include "util/mutex.h"

namespace agentkv::sched {

class IoExecutor {
 public:
  // `nice` is added to the executor thread's scheduling niceness (Linux
  // keeps it per thread, and threads it starts inherit it): background work
  // such as write-behind saves yields the cores to the inference thread when
  // both want them, and runs at full speed when the cores are idle.
  explicit IoExecutor(int nice = 0);
  ~IoExecutor();
  IoExecutor(const IoExecutor&) = delete;
  IoExecutor& operator=(const IoExecutor&) = delete;

  void Post(std::function<void()> job);
  // Blocks until every job posted before the call has finished.
  void Flush();
  size_t Pending() const;

 private:
  void Run();

  mutable Mutex mu_;
  CondVar cv_;       // signals new jobs / stop
  CondVar idle_cv_;  // signals a finished job
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  uint64_t posted_ GUARDED_BY(mu_) = 0;
  uint64_t done_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  const int nice_;
  std::thread thread_;
};

}  // namespace agentkv::sched
