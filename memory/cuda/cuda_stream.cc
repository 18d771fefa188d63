#include "memory/cuda/cuda_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/status_macros.h"
#include "memory/cuda/current_device.h"
#include "memory/cuda/driver_api.h"

namespace zero::cuda {

CudaEvent::~CudaEvent() {
  ScopedDevice on(ordinal_);
  cudaEventDestroy(event_);
}

bool CudaEvent::Query() const {
  ScopedDevice on(ordinal_);
  const cudaError_t state = cudaEventQuery(event_);
  // "Not ready" is an answer, not an error, yet the runtime keeps it as the
  // thread's last error, where the next launch check (ours or PyTorch's)
  // would find it.
  if (state == cudaErrorNotReady) (void)cudaGetLastError();
  return state == cudaSuccess;
}

absl::Status CudaEvent::DoSynchronize() const {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

absl::StatusOr<std::unique_ptr<Stream>> CudaStream::Create(int device, int ordinal) {
  ScopedDevice on(ordinal);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  cudaStream_t stream = nullptr;
  RETURN_IF_ERROR(RuntimeStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags"));
  return std::unique_ptr<Stream>(new CudaStream(device, ordinal, stream, /*owned=*/true));
}

std::unique_ptr<Stream> CudaStream::Wrap(int device, int ordinal, cudaStream_t stream) {
  return std::unique_ptr<Stream>(new CudaStream(device, ordinal, stream, /*owned=*/false));
}

CudaStream::~CudaStream() {
  FreeStaging();
  if (!owned_) return;  // its owner may already have destroyed it
  ScopedDevice on(ordinal_);
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

absl::Status CudaStream::DoEnqueue(absl::AnyInvocable<void() &&> fn) {
  using Fn = absl::AnyInvocable<void() &&>;
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  auto* heap = new Fn(std::move(fn));
  cudaError_t err = cudaLaunchHostFunc(
      stream_,
      [](void* data) {
        std::unique_ptr<Fn> owned(static_cast<Fn*>(data));
        std::move (*owned)();
      },
      heap);
  if (err != cudaSuccess) delete heap;
  return RuntimeStatus(err, "cudaLaunchHostFunc");
}

absl::Status CudaStream::DoCopy(void* dst, const void* src, size_t bytes) {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                       "cudaMemcpyAsync");
}

absl::Status CudaStream::DoFill(void* dst, unsigned char value, size_t bytes) {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaMemsetAsync(dst, value, bytes, stream_), "cudaMemsetAsync");
}

absl::Status CudaStream::DoCopyFromPageable(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  ASSIGN_OR_RETURN(Staging staged, TakeStaging(bytes));
  std::memcpy(staged.data, src, bytes);
  const cudaError_t copied =
      cudaMemcpyAsync(dst, staged.data, bytes, cudaMemcpyDefault, stream_);
  if (copied != cudaSuccess) {
    ReturnStaging(std::move(staged));  // nothing reads it
    return RuntimeStatus(copied, "cudaMemcpyAsync");
  }
  absl::StatusOr<std::shared_ptr<Event>> read = DoRecord();
  if (!read.ok()) {
    // Without an event the buffer is reusable only once the stream is done.
    counts().HostWait();
    absl::Status drained = DoSynchronize();
    ReturnStaging(std::move(staged));
    return drained;
  }
  staged.read = std::move(*read);
  ReturnStaging(std::move(staged));
  return absl::OkStatus();
}

absl::StatusOr<CudaStream::Staging> CudaStream::TakeStaging(size_t bytes) {
  {
    MutexLock lock(staging_mu_);
    auto best = staging_.end();
    for (auto it = staging_.begin(); it != staging_.end(); ++it) {
      const bool idle = it->read == nullptr || it->read->Query();
      if (idle && it->capacity >= bytes &&
          (best == staging_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != staging_.end()) {
      Staging s = std::move(*best);
      staging_.erase(best);
      s.read = nullptr;
      return s;
    }
  }
  // Rounded up, so slightly larger requests reuse it too.
  const size_t capacity = (bytes + kStagingQuantum - 1) / kStagingQuantum * kStagingQuantum;
  RETURN_IF_ERROR(MakeStagingRoom(capacity));
  void* data = nullptr;
  counts().DriverCall();
  const cudaError_t pinned = cudaHostAlloc(&data, capacity, cudaHostAllocPortable);
  if (pinned != cudaSuccess) {
    (void)cudaGetLastError();
    MutexLock lock(staging_mu_);
    staged_bytes_ -= capacity;
    return RuntimeStatus(pinned, "cudaHostAlloc");
  }
  return Staging{.data = data, .capacity = capacity, .read = nullptr};
}

// The host never waits while the pinned bytes stay under the bound; past it
// (copies enqueued faster than the card runs them: a whole step's gradients
// in flight) the oldest buffers are waited for and freed, so pinned memory
// stays bounded. A single copy larger than the bound still gets its buffer.
absl::Status CudaStream::MakeStagingRoom(size_t capacity) {
  MutexLock lock(staging_mu_);
  while (staged_bytes_ + capacity > kMaxStagingBytes && !staging_.empty()) {
    Staging oldest = std::move(staging_.front());
    staging_.erase(staging_.begin());
    staged_bytes_ -= oldest.capacity;
    if (oldest.read != nullptr) {
      absl::Status done = oldest.read->Synchronize();
      if (!done.ok()) {
        staging_.insert(staging_.begin(), std::move(oldest));  // a copy may still read it
        staged_bytes_ += staging_.front().capacity;
        return done;
      }
    }
    cudaFreeHost(oldest.data);
  }
  staged_bytes_ += capacity;
  return absl::OkStatus();
}

void CudaStream::ReturnStaging(Staging staging) {
  MutexLock lock(staging_mu_);
  staging_.push_back(std::move(staging));
  if (staging_.size() <= kMaxStaging) return;
  auto smallest = staging_.end();
  for (auto it = staging_.begin(); it != staging_.end(); ++it) {
    const bool idle = it->read == nullptr || it->read->Query();
    if (idle && (smallest == staging_.end() || it->capacity < smallest->capacity)) smallest = it;
  }
  if (smallest == staging_.end()) return;  // all in flight: kept until the next return
  staged_bytes_ -= smallest->capacity;
  cudaFreeHost(smallest->data);
  staging_.erase(smallest);
}

void CudaStream::FreeStaging() {
  MutexLock lock(staging_mu_);
  for (Staging& s : staging_) {
    if (s.read != nullptr) (void)s.read->Synchronize();
    cudaFreeHost(s.data);
  }
  staging_.clear();
  staged_bytes_ = 0;
}

absl::StatusOr<std::shared_ptr<Event>> CudaStream::DoRecord() {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  MutexLock lock(events_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<CudaEvent> event,
                   events_.Acquire([this]() -> absl::StatusOr<std::shared_ptr<CudaEvent>> {
                     counts().DriverCall();
                     cudaEvent_t created = nullptr;
                     RETURN_IF_ERROR(RuntimeStatus(
                         cudaEventCreateWithFlags(&created, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags"));
                     return std::make_shared<CudaEvent>(ordinal_, created, shared_counts());
                   }));
  RETURN_IF_ERROR(RuntimeStatus(cudaEventRecord(event->native(), stream_), "cudaEventRecord"));
  return std::shared_ptr<Event>(std::move(event));
}

size_t CudaStream::events_created() {
  MutexLock lock(events_mu_);
  return events_.created();
}

absl::Status CudaStream::DoWait(const std::shared_ptr<Event>& event) {
  auto* cuda_event = dynamic_cast<const CudaEvent*>(event.get());
  if (cuda_event == nullptr) {
    // An event of another backend: order by blocking the host instead.
    return event == nullptr ? absl::InvalidArgumentError("Wait on a null event")
                            : event->Synchronize();
  }
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaStreamWaitEvent(stream_, cuda_event->native(), 0),
                       "cudaStreamWaitEvent");
}

absl::Status CudaStream::DoSynchronize() {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace zero::cuda
