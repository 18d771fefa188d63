#include "memory/cuda/cuda_stream.h"

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
  return cudaEventQuery(event_) == cudaSuccess;
}

absl::Status CudaEvent::Synchronize() const {
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
  if (!owned_) return;  // its owner may already have destroyed it
  ScopedDevice on(ordinal_);
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

absl::Status CudaStream::Enqueue(absl::AnyInvocable<void() &&> fn) {
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

absl::Status CudaStream::Copy(void* dst, const void* src, size_t bytes) {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_),
                       "cudaMemcpyAsync");
}

absl::Status CudaStream::Fill(void* dst, unsigned char value, size_t bytes) {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaMemsetAsync(dst, value, bytes, stream_), "cudaMemsetAsync");
}

absl::StatusOr<std::shared_ptr<Event>> CudaStream::Record() {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  std::lock_guard<std::mutex> lock(events_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<CudaEvent> event,
                   events_.Acquire([this]() -> absl::StatusOr<std::shared_ptr<CudaEvent>> {
                     cudaEvent_t created = nullptr;
                     RETURN_IF_ERROR(RuntimeStatus(
                         cudaEventCreateWithFlags(&created, cudaEventDisableTiming),
                         "cudaEventCreateWithFlags"));
                     return std::make_shared<CudaEvent>(ordinal_, created);
                   }));
  RETURN_IF_ERROR(RuntimeStatus(cudaEventRecord(event->native(), stream_), "cudaEventRecord"));
  return std::shared_ptr<Event>(std::move(event));
}

size_t CudaStream::events_created() {
  std::lock_guard<std::mutex> lock(events_mu_);
  return events_.created();
}

absl::Status CudaStream::Wait(const std::shared_ptr<Event>& event) {
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

absl::Status CudaStream::Synchronize() {
  ScopedDevice on(ordinal_);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  return RuntimeStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace zero::cuda
