#pragma once
// Mutex, MutexLock, CondVar: std::mutex, std::unique_lock and std::condition_variable (and
// SharedMutex, ReaderMutexLock, WriterMutexLock: std::shared_mutex and its locks) with clang's
// thread-safety annotations (util/thread_annotations.h), as abseil's absl::Mutex and
// LevelDB's port::Mutex give them. libstdc++'s own types carry none, so a
// GUARDED_BY(mu_) field is checked only when mu_ is one of these.
//
// Thread safety: the types are what they wrap; no extra state, no extra cost.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "util/thread_annotations.h"

namespace agentkv {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For a function whose caller is known to hold the lock, where the analysis cannot see it.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction. Unlock()/Lock() in between (e.g. to do I/O
// without the lock, as LevelDB does) must be paired; the destructor releases only a held lock.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->mu_) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A condition variable waited on with a MutexLock held; the lock is held again on return.
// The analysis checks a lambda as a function of its own, which holds no lock: with a
// GUARDED_BY condition write the loop, `while (!ready_) cv_.Wait(&lock);`.
class CondVar {
 public:
  void Wait(MutexLock* lock) { cv_.wait(lock->lock_); }
  template <typename Pred>
  void Wait(MutexLock* lock, Pred pred) {
    cv_.wait(lock->lock_, pred);
  }
  // Returns after `d`, on a notification or on a spurious wake-up, whichever comes first.
  template <typename Rep, typename Period>
  void WaitFor(MutexLock* lock, std::chrono::duration<Rep, Period> d) {
    cv_.wait_for(lock->lock_, d);
  }
  // Returns pred() at the end (false: timed out with pred() still false).
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(MutexLock* lock, std::chrono::duration<Rep, Period> d, Pred pred) {
    return cv_.wait_for(lock->lock_, d, pred);
  }
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A reader/writer lock: many holders in shared mode (ReaderMutexLock) or one in exclusive
// mode (WriterMutexLock). A GUARDED_BY(it) field may be read in either mode, written only in
// exclusive mode.
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` in shared mode from construction to destruction.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderMutexLock() RELEASE() { mu_->UnlockShared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` exclusively from construction to destruction.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace agentkv
