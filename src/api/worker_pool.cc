#include "api/worker_pool.h"

#include <cassert>
#include <thread>

#include "util/log.h"

namespace agentkv::api {

WorkerPool::WorkerPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_exit)
    : min_threads_(min_threads), max_threads_(max_threads), idle_exit_(idle_exit) {
  assert(min_threads >= 1 && min_threads <= max_threads);
}

WorkerPool::~WorkerPool() { shutdown(); }

bool WorkerPool::enqueue(std::function<void()> fn) {
  MutexLock lock(&mu_);
  if (stopping_) return false;
  jobs_.push_back(std::move(fn));
  if (n_idle_ < jobs_.size() && n_threads_ < max_threads_) {
    ++n_threads_;
    // Detached: shutdown() waits for n_threads_ to reach 0 instead of joining.
    std::thread([this] { Work(); }).detach();
  }
  work_cv_.NotifyOne();
  return true;
}

void WorkerPool::Work() {
  MutexLock lock(&mu_);
  for (;;) {
    ++n_idle_;
    // The predicate runs with mu_ held (CondVar::WaitFor); the analysis cannot see that.
    const bool woken =
        work_cv_.WaitFor(&lock, idle_exit_, [&]() NO_THREAD_SAFETY_ANALYSIS { return !jobs_.empty() || stopping_; });
    --n_idle_;
    if (jobs_.empty()) {
      if (stopping_ || (!woken && n_threads_ > min_threads_)) break;
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.Unlock();
    // An exception out of a connection's job (std::bad_alloc outside
    // httplib's handler guard) would terminate every tenant's server: the
    // one connection is lost instead.
    try {
      job();
    } catch (const std::exception& e) {
      AKV_LOG_ERROR("http worker: a connection ended by an exception: %s", e.what());
    } catch (...) {
      AKV_LOG_ERROR("http worker: a connection ended by an unknown exception");
    }
    lock.Lock();
  }
  --n_threads_;
  exit_cv_.NotifyAll();
}

void WorkerPool::shutdown() {
  MutexLock lock(&mu_);
  stopping_ = true;
  work_cv_.NotifyAll();
  while (n_threads_ != 0) exit_cv_.Wait(&lock);
}

size_t WorkerPool::threads() const {
  MutexLock lock(&mu_);
  return n_threads_;
}

}  // namespace agentkv::api
