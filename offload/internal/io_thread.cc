#include "offload/internal/io_thread.h"

#include <system_error>

#include "absl/strings/str_cat.h"

namespace zero {

absl::StatusOr<std::unique_ptr<IoThread>> IoThread::Create() {
  std::unique_ptr<IoThread> io(new IoThread());
  try {
    io->thread_ = std::thread([raw = io.get()] { raw->Run(); });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot start an I/O thread: ", e.what()));
  }
  return io;
}

IoThread::~IoThread() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void IoThread::Push(std::packaged_task<absl::Status()> task) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void IoThread::Run() {
  MutexLock lock(mu_);
  while (true) {
    lock.Await(changed_,
               [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::packaged_task<absl::Status()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    task();  // its status (or exception) goes to its future
    lock.Lock();
  }
}

}  // namespace zero
