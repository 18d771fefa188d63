#include "zero/internal/serial_worker.h"

#include <utility>

namespace zero {

void SerialWorker::Post(Task task) {
  posted_.push_back(queue_.Submit([this, task = std::move(task)] {
    if (failed_) return absl::OkStatus();  // the failure is reported once
    absl::Status status = task();
    failed_ = !status.ok();
    return status;
  }));
}

absl::Status SerialWorker::Wait() {
  absl::Status first;
  for (std::future<absl::Status>& done : posted_) {
    absl::Status status = done.get();
    if (first.ok()) first = std::move(status);
  }
  posted_.clear();
  // Every posted task has run: the queue's thread no longer reads the flag.
  failed_ = false;
  return first;
}

}  // namespace zero
