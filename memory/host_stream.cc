#include "memory/host_stream.h"

#include <cstring>
#include <utility>

namespace zero {

bool HostEvent::Query() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status HostEvent::Synchronize() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return absl::OkStatus();
}

void HostEvent::Complete() {
  absl::MutexLock lock(&mu_);
  done_ = true;
}

HostStream::HostStream(int device) : device_(device), worker_([this] { Run(); }) {}

HostStream::~HostStream() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  worker_.join();
}

void HostStream::Run() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  };
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

absl::Status HostStream::Enqueue(absl::AnyInvocable<void() &&> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("stream is shutting down");
  queue_.push_back(std::move(fn));
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
