#include "sched/io_executor.h"

#include <sys/resource.h>
#include <unistd.h>

#include "util/log.h"

namespace agentkv::sched {

IoExecutor::IoExecutor(int nice) : nice_(nice), thread_([this] { Run(); }) {}

IoExecutor::~IoExecutor() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void IoExecutor::Post(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
    ++posted_;
  }
  cv_.NotifyOne();
}

void IoExecutor::Flush() {
  MutexLock lock(&mu_);
  const uint64_t target = posted_;
  idle_cv_.Wait(&lock, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return done_ >= target;
  });
}

size_t IoExecutor::Pending() const {
  MutexLock lock(&mu_);
  return static_cast<size_t>(posted_ - done_);
}

void IoExecutor::Run() {
  if (nice_ != 0) {
    const int current = getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), current + nice_) != 0) {
      AKV_LOG_DEBUG("io executor: could not lower its priority (nice %d)", nice_);
    }
  }
  MutexLock lock(&mu_);
  for (;;) {
    cv_.Wait(&lock, [&] {
      mu_.AssertHeld();  // the predicate runs with the lock held
      return stop_ || !jobs_.empty();
    });
    if (jobs_.empty()) return;  // stop_ and drained
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.Unlock();
    job();
    lock.Lock();
    ++done_;
    idle_cv_.NotifyAll();
  }
}

}  // namespace agentkv::sched
