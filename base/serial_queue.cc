#include "base/serial_queue.h"

#include <system_error>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"

namespace zero {

SerialQueue::SerialQueue(Hooks hooks, const char* name)
    : hooks_(std::move(hooks)), name_(name), thread_([this] { Run(); }) {}

absl::StatusOr<std::unique_ptr<SerialQueue>> SerialQueue::Create(Hooks hooks, const char* name) {
  try {
    return std::make_unique<SerialQueue>(std::move(hooks), name);
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot start a worker thread: ", e.what()));
  }
}

SerialQueue::~SerialQueue() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SerialQueue::Post(Work work) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(work));
    ++posted_;
  }
  changed_.notify_all();
}

void SerialQueue::Drain() {
  MutexLock lock(mu_);
  const uint64_t target = posted_;
  lock.Await(changed_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= target; });
}

void SerialQueue::Run() {
  NameThisThread(name_);
  MutexLock lock(mu_);
  while (true) {
    lock.Await(changed_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything posted has run
    {
      Work work = std::move(queue_.front());
      queue_.pop_front();
      lock.Unlock();
      if (hooks_.before) hooks_.before();
      std::move(work)();
      if (hooks_.after) hooks_.after();
    }  // what the work captured goes before the lock is taken again
    lock.Lock();
    ++done_;
    changed_.notify_all();
  }
}

}  // namespace zero
