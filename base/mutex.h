// A mutex that clang's thread-safety analysis can check. ABSL_GUARDED_BY on
// a plain std::mutex checks nothing (libstdc++'s mutex carries no capability
// annotation: clang warns about the annotation itself and then about every
// access), and absl::Mutex from Debian is not instrumented, so ThreadSanitizer
// would not see its locks (BUILD_NOTES.md). This is a std::mutex underneath,
// seen by TSan, with the annotations clang needs:
//
//   Mutex mu_;
//   int count_ ABSL_GUARDED_BY(mu_);
//   { MutexLock lock(mu_); ++count_; }
//   { MutexLock lock(mu_); lock.Await(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
//       return count_ > 0; }); }
//
// gcc (the build) ignores the annotations; bench/thread_safety.sh runs
// clang's analysis over every source that uses this and fails on a violation
// (./test.sh runs it).
#pragma once

#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace zero {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Lets go for work that must not hold the mutex, then takes it back.
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }

  // Sleeps on `cv`, the mutex released meanwhile, until `ready()` (called
  // with the mutex held; annotate it ABSL_EXCLUSIVE_LOCKS_REQUIRED) is true.
  template <typename Ready>
  void Await(std::condition_variable& cv, Ready ready) {
    cv.wait(lock_, std::move(ready));
  }
  // Await with a deadline: false when it passed with `ready()` still false.
  template <typename TimePoint, typename Ready>
  bool AwaitUntil(std::condition_variable& cv, const TimePoint& deadline, Ready ready) {
    return cv.wait_until(lock_, deadline, std::move(ready));
  }
  // Sleeps on `cv` for at most `timeout` (or until notified, or spuriously).
  template <typename Duration>
  void WaitFor(std::condition_variable& cv, const Duration& timeout) {
    cv.wait_for(lock_, timeout);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace zero
