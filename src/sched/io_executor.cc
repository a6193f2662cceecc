#include "sched/io_executor.h"

#include <sys/resource.h>
#include <unistd.h>

#include "util/log.h"

namespace agentkv::sched {

IoExecutor::IoExecutor(int nice) : nice_(nice), thread_([this] { Run(); }) {}

IoExecutor::~IoExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void IoExecutor::Post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    ++posted_;
  }
  cv_.notify_one();
}

void IoExecutor::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = posted_;
  idle_cv_.wait(lock, [&] { return done_ >= target; });
}

size_t IoExecutor::Pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(posted_ - done_);
}

void IoExecutor::Run() {
  if (nice_ != 0) {
    const int current = getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), current + nice_) != 0) {
      AKV_LOG_DEBUG("io executor: could not lower its priority (nice %d)", nice_);
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_ and drained
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
    ++done_;
    idle_cv_.notify_all();
  }
}

}  // namespace agentkv::sched
