#include "zero/capi/call_thread.h"

#include <utility>

namespace zero {

CallThread::CallThread() : thread_(&CallThread::Run, this) {}

CallThread::~CallThread() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  posted_.notify_one();
  thread_.join();
}

void CallThread::Post(absl::AnyInvocable<void() &&> fn) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(fn));
  }
  posted_.notify_one();
}

void CallThread::Run() {
  MutexLock lock(mu_);
  while (true) {
    lock.Await(posted_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !queue_.empty();
    });
    if (queue_.empty()) return;  // stopping, and everything posted has run
    absl::AnyInvocable<void() &&> fn = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    std::move(fn)();
    lock.Lock();
  }
}

}  // namespace zero
