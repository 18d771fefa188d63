#include "memory/host_stream.h"

#include <cstring>
#include <utility>

namespace zero {

bool HostEvent::Query() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

absl::Status HostEvent::Synchronize() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return absl::OkStatus();
}

void HostEvent::Complete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

HostStream::HostStream(int device) : device_(device), worker_([this] { Run(); }) {}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  worker_.join();
}

void HostStream::Run() {
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

absl::Status HostStream::Enqueue(absl::AnyInvocable<void() &&> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::FailedPreconditionError("stream is shutting down");
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

absl::Status HostStream::Copy(void* dst, const void* src, size_t bytes) {
  return Enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
}

absl::Status HostStream::Fill(void* dst, unsigned char value, size_t bytes) {
  return Enqueue([dst, value, bytes] { std::memset(dst, value, bytes); });
}

absl::StatusOr<std::shared_ptr<Event>> HostStream::Record() {
  auto event = std::make_shared<HostEvent>();
  absl::Status status = Enqueue([event] { event->Complete(); });
  if (!status.ok()) return status;
  return std::shared_ptr<Event>(event);
}

absl::Status HostStream::Wait(const std::shared_ptr<Event>& event) {
  if (event == nullptr) return absl::InvalidArgumentError("Wait on a null event");
  if (event->Query()) return absl::OkStatus();
  return Enqueue([event] { (void)event->Synchronize(); });
}

absl::Status HostStream::Synchronize() {
  absl::StatusOr<std::shared_ptr<Event>> event = Record();
  if (!event.ok()) return event.status();
  return (*event)->Synchronize();
}

absl::Status MetaStream::Enqueue(absl::AnyInvocable<void() &&> fn) {
  std::move(fn)();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Event>> MetaStream::Record() {
  auto event = std::make_shared<HostEvent>();
  event->Complete();
  return std::shared_ptr<Event>(event);
}

}  // namespace zero
