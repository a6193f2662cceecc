#pragma once
// WorkerPool: the HTTP server's threads (a cpp-httplib TaskQueue).
//
// cpp-httplib runs each connection as one job that holds its thread for as
// long as the connection is open, idle or not. httplib's own pool starts an
// extra thread only when no thread is idle at the instant of enqueueing, so
// a burst of connections leaves jobs queued behind busy threads (a /health
// probe waits for idle connections to time out). WorkerPool starts a thread
// whenever queued jobs outnumber idle threads, up to max_threads, so no job
// waits while a thread could be started; threads above min_threads exit
// after idle_exit without work.
//
// Thread safety: enqueue and shutdown may be called from any thread.
// Invariants (under mu_): n_idle_ <= n_threads_ <= max_threads_; a job is
// queued only while n_idle_ < jobs_.size() implies n_threads_ == max_threads_.

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>

#include <cpp-httplib/httplib.h>

#include "util/mutex.h"

namespace agentkv::api {

class WorkerPool final : public httplib::TaskQueue {
 public:
  // REQUIRES: 1 <= min_threads <= max_threads.
  WorkerPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_exit);
  ~WorkerPool() override;  // shutdown()

  // Queues `fn`; false (the connection is closed by httplib) after shutdown.
  bool enqueue(std::function<void()> fn) override;
  // Runs the jobs already queued, then waits until every thread has exited.
  // Idempotent.
  void shutdown() override;

  size_t threads() const;  // started and not yet exited (tests)

 private:
  void Work();

  const size_t min_threads_;
  const size_t max_threads_;
  const std::chrono::milliseconds idle_exit_;
  mutable Mutex mu_;
  CondVar work_cv_;  // a job was queued, or shutdown
  CondVar exit_cv_;  // a thread exited
  std::deque<std::function<void()>> jobs_ GUARDED_BY(mu_);
  size_t n_threads_ GUARDED_BY(mu_) = 0;
  size_t n_idle_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace agentkv::api

