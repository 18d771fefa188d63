// Streams for host and meta devices.
//
// HostStream is an ordered executor: one worker thread runs enqueued work in
// order, so an event recorded on one stream and waited on by another really
// orders work, as on a card. MetaStream does nothing: meta devices have no
// bytes, so there is nothing to order; host functions run at once.
#pragma once

#include <deque>
#include <memory>
#include <thread>

#include <condition_variable>
#include <mutex>
#include "memory/stream.h"

namespace zero {

// Completes once; shared between the recording stream and its waiters.
class HostEvent final : public Event {
 public:
  bool Query() const override;
  absl::Status Synchronize() const override;
  void Complete();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class HostStream final : public Stream {
 public:
  explicit HostStream(int device);
  ~HostStream() override;  // drains the queue, then joins the worker

  int device() const override { return device_; }
  absl::Status Enqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status Fill(void* dst, unsigned char value, size_t bytes) override;
  absl::StatusOr<std::shared_ptr<Event>> Record() override;
  absl::Status Wait(const std::shared_ptr<Event>& event) override;
  absl::Status Synchronize() override;

 private:
  void Run();

  const int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

class MetaStream final : public Stream {
 public:
  explicit MetaStream(int device) : device_(device) {}
  int device() const override { return device_; }
  absl::Status Enqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status Copy(void*, const void*, size_t) override { return absl::OkStatus(); }
  absl::Status Fill(void*, unsigned char, size_t) override { return absl::OkStatus(); }
  absl::StatusOr<std::shared_ptr<Event>> Record() override;
  absl::Status Wait(const std::shared_ptr<Event>&) override { return absl::OkStatus(); }
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  const int device_;
};

}  // namespace zero
