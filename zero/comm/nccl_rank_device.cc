#include "zero/comm/nccl_rank_device.h"

#include "base/status_macros.h"
#include "memory/cuda/current_device.h"
#include "memory/cuda/driver_api.h"

namespace zero::nccl {
namespace {

using cuda::RuntimeStatus;
using cuda::ScopedDevice;

class EventMarker final : public ProgressMarker {
 public:
  explicit EventMarker(cudaEvent_t event) : event_(event) {}
  ~EventMarker() override { cudaEventDestroy(event_); }

  absl::StatusOr<bool> Done() override {
    const cudaError_t error = cudaEventQuery(event_);
    if (error == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not sticky, but keep the runtime's last error
                                 // clean
      return false;
    }
    RETURN_IF_ERROR(RuntimeStatus(error, "cudaEventQuery"));
    return true;
  }

 private:
  const cudaEvent_t event_;
};

class CudaRankDevice final : public NcclRankDevice {
 public:
  CudaRankDevice(int ordinal, float* scratch) : ordinal_(ordinal), scratch_(scratch) {}
  ~CudaRankDevice() override {
    ScopedDevice card(ordinal_);
    cudaFree(scratch_);
  }

  int ordinal() const override { return ordinal_; }
  int StreamOrdinal(cudaStream_t stream) const override { return ScopedDevice::OrdinalOf(stream); }
  absl::Status OnCard(absl::FunctionRef<absl::Status()> body) override {
    return RunOnCard(ordinal_, body);
  }
  absl::StatusOr<std::unique_ptr<ProgressMarker>> Mark(cudaStream_t stream) override {
    cudaEvent_t event = nullptr;
    RETURN_IF_ERROR(RuntimeStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                  "cudaEventCreateWithFlags"));
    auto marker = std::make_unique<EventMarker>(event);
    RETURN_IF_ERROR(RuntimeStatus(cudaEventRecord(event, stream), "cudaEventRecord"));
    return marker;
  }
  float* scratch() override { return scratch_; }

 private:
  const int ordinal_;
  float* const scratch_;
};

}  // namespace

absl::Status RunOnCard(int ordinal, absl::FunctionRef<absl::Status()> body) {
  ScopedDevice card(ordinal);
  RETURN_IF_ERROR(RuntimeStatus(card.status(), "cudaSetDevice"));
  return body();
}

absl::StatusOr<std::unique_ptr<NcclRankDevice>> MakeCudaRankDevice(int ordinal) {
  void* scratch = nullptr;
  RETURN_IF_ERROR(RunOnCard(
      ordinal, [&] { return RuntimeStatus(cudaMalloc(&scratch, sizeof(float)), "cudaMalloc"); }));
  return std::make_unique<CudaRankDevice>(ordinal, static_cast<float*>(scratch));
}

}  // namespace zero::nccl
