// Stream and Event over cudaStream_t / cudaEvent_t. Each call makes the
// stream's card current for its duration and restores the caller's after
// (memory/cuda/current_device.h). `device` is the index in the DeviceSystem,
// `ordinal` the CUDA card number ("cuda:2" makes device 0 card 2). Record() re-records a pooled
// cudaEvent_t that no one holds any more (memory/event_pool.h), so a warm
// stream creates no events; cudaStreamWaitEvent binds to the record current
// at the call, so a later re-record cannot confuse an earlier wait.
// CopyFromPageable stages through pinned buffers the stream recycles once
// the copy that read them is done (an event), so it returns without a host
// wait, as cudaMemcpyAsync from pinned memory does.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "memory/event_pool.h"
#include "memory/stream.h"

namespace zero::cuda {

// Owns its cudaEvent_t (destroyed with the last holder, pool included).
class CudaEvent final : public Event {
 public:
  CudaEvent(int ordinal, cudaEvent_t event, std::shared_ptr<StreamCounts> counts)
      : Event(std::move(counts)), ordinal_(ordinal), event_(event) {}
  ~CudaEvent() override;
  bool Query() const override;
  cudaEvent_t native() const { return event_; }

 private:
  absl::Status DoSynchronize() const override;
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
  void* native_handle() const override { return stream_; }
  bool is_card() const override { return true; }
  int native_device() const override { return ordinal_; }
  // Events Record() had to create; the rest were re-recorded.
  size_t events_created();

 private:
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&> fn) override;
  absl::Status DoCopy(void* dst, const void* src, size_t bytes) override;
  absl::Status DoFill(void* dst, unsigned char value, size_t bytes) override;
  // Copies `src` (host memory) into a pinned staging buffer now, then
  // enqueues the copy from it: the caller may reuse `src` at once and the
  // host never waits. Asks nothing of the driver about `src`: card memory
  // goes through Copy (the caller says which it has).
  absl::Status DoCopyFromPageable(void* dst, const void* src, size_t bytes) override;
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override;
  absl::Status DoWait(const std::shared_ptr<Event>& event) override;
  absl::Status DoSynchronize() override;
  CudaStream(int device, int ordinal, cudaStream_t stream, bool owned)
      : device_(device), ordinal_(ordinal), stream_(stream), owned_(owned) {}

  // A pinned buffer and the event after the last copy that read it (null:
  // none in flight).
  struct Staging {
    void* data = nullptr;
    size_t capacity = 0;
    std::shared_ptr<Event> read;
  };
  static constexpr size_t kMaxStaging = 8;
  static constexpr size_t kMaxStagingBytes = size_t{256} << 20;
  static constexpr size_t kStagingQuantum = size_t{64} << 10;
  // The smallest idle buffer that fits, else a new one (cudaHostAlloc).
  absl::StatusOr<Staging> TakeStaging(size_t bytes);
  // Counts `capacity` more pinned bytes, first waiting for and freeing the
  // oldest kept buffers while the total would pass kMaxStagingBytes.
  absl::Status MakeStagingRoom(size_t capacity);
  // Keeps it for later copies; beyond kMaxStaging, frees the smallest idle.
  void ReturnStaging(Staging staging);
  void FreeStaging();  // waits for the copies in flight, then frees all

  const int device_;
  const int ordinal_;
  const cudaStream_t stream_;
  const bool owned_;
  Mutex events_mu_;
  EventPool<CudaEvent> events_ ABSL_GUARDED_BY(events_mu_);
  Mutex staging_mu_;
  std::vector<Staging> staging_ ABSL_GUARDED_BY(staging_mu_);  // kept, oldest first
  size_t staged_bytes_ ABSL_GUARDED_BY(staging_mu_) = 0;  // kept and taken, pinned
};

}  // namespace zero::cuda
