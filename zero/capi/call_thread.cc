#include "zero/capi/call_thread.h"

#include <utility>

namespace zero {

CallThread::CallThread() : thread_(&CallThread::Run, this) {}

CallThread::~CallThread() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  posted_.notify_one();
  thread_.join();
}

void CallThread::Post(absl::AnyInvocable<void() &&> fn) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(fn));
  }
  posted_.notify_one();
}

void CallThread::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    posted_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything posted has run
    absl::AnyInvocable<void() &&> fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::move(fn)();
    lock.lock();
  }
}

}  // namespace zero
