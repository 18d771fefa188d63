#include "zero/internal/serial_worker.h"

#include <utility>

namespace zero {

SerialWorker::SerialWorker() : thread_([this] { Run(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SerialWorker::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

absl::Status SerialWorker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
  return std::exchange(error_, absl::OkStatus());
}

void SerialWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Task task = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = !error_.ok();
    busy_ = true;
    lock.unlock();
    absl::Status status = skip ? absl::OkStatus() : task();
    lock.lock();
    busy_ = false;
    if (error_.ok()) error_ = status;
    changed_.notify_all();
  }
}

}  // namespace zero
