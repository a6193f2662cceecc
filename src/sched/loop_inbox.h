#pragma once
// LoopInbox: what other threads hand to the inference loop, behind the one
// lock the loop shares with them: requests (Push), tasks to run on the loop
// (Post: Scheduler::RunOnLoop), wake-ups (Wake: a read completed) and the
// stop (Close). The loop takes what arrived (Wait, TakeTasks) and never
// holds the lock while it computes; nothing else of the Scheduler's is
// shared through a lock.
//
// Thread safety: thread-safe; Wait and TakeTasks are the loop's.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

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
      std::lock_guard<std::mutex> lock(mu_);
      s = admit(closed_);
      if (s.ok() && item != nullptr) items_.push_back(std::move(*item));
    }
    if (s.ok() && item != nullptr) cv_.notify_all();
    return s;
  }
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  void Wake() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
  }

  // The loop: sleeps until something arrives, for at most `timeout` (not at
  // all when `busy`), then appends the requests that arrived to *out. False
  // once closed (the requests are still moved).
  bool Wait(std::chrono::milliseconds timeout, bool busy, std::deque<std::unique_ptr<Item>>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return closed_ || busy || woken_ || !items_.empty() || !tasks_.empty(); });
    woken_ = false;
    while (!items_.empty()) {
      out->push_back(std::move(items_.front()));
      items_.pop_front();
    }
    return !closed_;
  }
  // Sleeps for at most `timeout`, less if anything is pushed, posted or woken.
  void Nap(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout);
  }
  std::deque<std::function<void()>> TakeTasks() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(tasks_, {});
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Item>> items_;     // GUARDED_BY(mu_)
  std::deque<std::function<void()>> tasks_;     // GUARDED_BY(mu_)
  bool closed_ = false;                         // GUARDED_BY(mu_)
  bool woken_ = false;                          // GUARDED_BY(mu_)
};

}  // namespace agentkv::sched
