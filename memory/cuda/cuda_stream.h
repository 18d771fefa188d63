// Stream and Event over cudaStream_t / cudaEvent_t. Each call makes the
// stream's card current for its duration and restores the caller's after
// (memory/cuda/current_device.h). `device` is the index in the DeviceSystem,
// `ordinal` the CUDA card number ("cuda:2" makes device 0 card 2). Record() re-records a pooled
// cudaEvent_t that no one holds any more (memory/event_pool.h), so a warm
// stream creates no events; cudaStreamWaitEvent binds to the record current
// at the call, so a later re-record cannot confuse an earlier wait.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "memory/event_pool.h"
#include "memory/stream.h"

namespace zero::cuda {

// Owns its cudaEvent_t (destroyed with the last holder, pool included).
class CudaEvent final : public Event {
 public:
  CudaEvent(int ordinal, cudaEvent_t event) : ordinal_(ordinal), event_(event) {}
  ~CudaEvent() override;
  bool Query() const override;
  absl::Status Synchronize() const override;
  cudaEvent_t native() const { return event_; }

 private:
  const int ordinal_;
  const cudaEvent_t event_;
};

class CudaStream final : public Stream {
 public:
  static absl::StatusOr<std::unique_ptr<Stream>> Create(int device, int ordinal);
  // Borrows `stream` (null is the legacy default stream): the wrapper neither
  // synchronizes nor destroys it, so the owner may destroy it first.
  static std::unique_ptr<Stream> Wrap(int device, int ordinal, cudaStream_t stream);
  ~CudaStream() override;

  int device() const override { return device_; }
  absl::Status Enqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::Status Fill(void* dst, unsigned char value, size_t bytes) override;
  absl::StatusOr<std::shared_ptr<Event>> Record() override;
  absl::Status Wait(const std::shared_ptr<Event>& event) override;
  absl::Status Synchronize() override;
  void* native_handle() const override { return stream_; }
  // Events Record() had to create; the rest were re-recorded.
  size_t events_created();

 private:
  CudaStream(int device, int ordinal, cudaStream_t stream, bool owned)
      : device_(device), ordinal_(ordinal), stream_(stream), owned_(owned) {}
  const int device_;
  const int ordinal_;
  const cudaStream_t stream_;
  const bool owned_;
  std::mutex events_mu_;
  EventPool<CudaEvent> events_ ABSL_GUARDED_BY(events_mu_);
};

}  // namespace zero::cuda
