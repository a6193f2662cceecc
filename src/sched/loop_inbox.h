#pragma once
// LoopInbox: what other threads hand to the inference loop, behind the one
// lock the loop shares with them: requests (Push), tasks to run on the loop
// (Post: Scheduler::RunOnLoop), wake-ups (Wake: a read completed) and the
// stop (Close). The loop takes what arrived (Wait, TakeTasks) and never
// holds the lock while it computes; nothing else of the Scheduler's is
// shared through a lock.
//
// Thread safety: thread-safe; Wait and TakeTasks are the loop's.

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include "util/mutex.h"
#include "util/status.h"

namespace agentkv::sched {

template <typename Item>
class LoopInbox {
 public:
  // `admit(closed)` decides under the lock (so a refusal and the queue's
  // state agree); if it says OK, *item (unless null) is queued, moved from.
  Status Push(std::unique_ptr<Item>* item, const std::function<Status(bool closed)>& admit) {
    Status s;
    {
      MutexLock lock(&mu_);
      s = admit(closed_);
      if (s.ok() && item != nullptr) items_.push_back(std::move(*item));
    }
    if (s.ok() && item != nullptr) cv_.NotifyAll();
    return s;
  }
  void Post(std::function<void()> task) {
    {
      MutexLock lock(&mu_);
      tasks_.push_back(std::move(task));
      n_tasks_.store(tasks_.size(), std::memory_order_relaxed);
    }
    cv_.NotifyAll();
  }
  void Wake() {
    {
      MutexLock lock(&mu_);
      woken_ = true;
    }
    cv_.NotifyAll();
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = false;
    closing_.store(false, std::memory_order_relaxed);
  }
  void Close() {
    {
      MutexLock lock(&mu_);
      closed_ = true;
      closing_.store(true, std::memory_order_relaxed);
    }
    cv_.NotifyAll();
  }
  bool closed() const {
    MutexLock lock(&mu_);
    return closed_;
  }

  // The loop: sleeps until something arrives, for at most `timeout` (not at
  // all when `busy`), then appends the requests that arrived to *out. False
  // once closed (the requests are still moved).
  bool Wait(std::chrono::milliseconds timeout, bool busy, std::deque<std::unique_ptr<Item>>* out) {
    MutexLock lock(&mu_);
    // The predicate runs with mu_ held (CondVar::WaitFor); the analysis cannot see that
    // inside a lambda, hence AssertHeld.
    cv_.WaitFor(&lock, timeout, [&] {
      mu_.AssertHeld();
      return closed_ || busy || woken_ || !items_.empty() || !tasks_.empty();
    });
    woken_ = false;
    while (!items_.empty()) {
      out->push_back(std::move(items_.front()));
      items_.pop_front();
    }
    return !closed_;
  }
  // Sleeps for at most `timeout`, less if anything is pushed, posted or woken.
  void Nap(std::chrono::milliseconds timeout) {
    MutexLock lock(&mu_);
    cv_.WaitFor(&lock, timeout);
  }
  std::deque<std::function<void()>> TakeTasks() {
    MutexLock lock(&mu_);
    n_tasks_.store(0, std::memory_order_relaxed);
    return std::exchange(tasks_, {});
  }
  // Whether a posted task or the stop waits for the loop, without the lock:
  // for a loop that polls while it waits for something else (a pipelined
  // restore's gated decode), so that no RunOnLoop caller and no Stop waits
  // for that. Requests are counted by the Scheduler (n_waiting_).
  bool WantsLoop() const {
    return n_tasks_.load(std::memory_order_relaxed) > 0 || closing_.load(std::memory_order_relaxed);
  }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::unique_ptr<Item>> items_ GUARDED_BY(mu_);
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  bool woken_ GUARDED_BY(mu_) = false;
  // Mirrors of tasks_.size() and closed_ for WantsLoop, written under mu_.
  std::atomic<size_t> n_tasks_{0};
  std::atomic<bool> closing_{false};
};

}  // namespace agentkv::sched
