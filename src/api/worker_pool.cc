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
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  jobs_.push_back(std::move(fn));
  if (n_idle_ < jobs_.size() && n_threads_ < max_threads_) {
    ++n_threads_;
    // Detached: shutdown() waits for n_threads_ to reach 0 instead of joining.
    std::thread([this] { Work(); }).detach();
  }
  work_cv_.notify_one();
  return true;
}

void WorkerPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++n_idle_;
    const bool woken = work_cv_.wait_for(lock, idle_exit_, [&] { return !jobs_.empty() || stopping_; });
    --n_idle_;
    if (jobs_.empty()) {
      if (stopping_ || (!woken && n_threads_ > min_threads_)) break;
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
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
    lock.lock();
  }
  --n_threads_;
  exit_cv_.notify_all();
}

void WorkerPool::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  work_cv_.notify_all();
  exit_cv_.wait(lock, [&] { return n_threads_ == 0; });
}

size_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_threads_;
}

}  // namespace agentkv::api
