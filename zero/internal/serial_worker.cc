#include "zero/internal/serial_worker.h"

#include <utility>

namespace zero {

SerialWorker::SerialWorker() : thread_([this] { Run(); }) {}

SerialWorker::~SerialWorker() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SerialWorker::Post(Task task) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

absl::Status SerialWorker::Wait() {
  MutexLock lock(mu_);
  lock.Await(changed_,
             [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !busy_; });
  return std::exchange(error_, absl::OkStatus());
}

void SerialWorker::Run() {
  MutexLock lock(mu_);
  while (true) {
    lock.Await(changed_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Task task = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = !error_.ok();
    busy_ = true;
    lock.Unlock();
    absl::Status status = skip ? absl::OkStatus() : task();
    lock.Lock();
    busy_ = false;
    if (error_.ok()) error_ = status;
    changed_.notify_all();
  }
}

}  // namespace zero
