#include "compute/cuda/launch.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "compute/cuda/elementwise_kernels.h"
#include "compute/cuda/quantize_kernels.h"

namespace zero::cuda {

// Asked once per process: every launch checks for a card, and
// cudaGetDeviceCount is a driver call each time (issue 39's launch budget).
// The count does not change while the process runs (CUDA_VISIBLE_DEVICES is
// read at CUDA's initialization).
int DeviceCount() {
  static const int count = [] {
    int n = 0;
    return internal::DeviceCount(&n) == 0 ? n : 0;
  }();
  return count;
}

absl::Status RequireDevice() {
  if (DeviceCount() > 0) return absl::OkStatus();
  return absl::FailedPreconditionError("no CUDA device (or no driver)");
}

absl::Status FromCuda(int error, std::string_view what) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(std::string(what), ": ", internal::ErrorString(error)));
}

absl::Status FlagInfOrNan(const void* data, DType dtype, size_t count, int32_t* device_flag,
                          void* stream) {
  if (!IsValid(dtype)) return absl::InvalidArgumentError("invalid dtype");
  if (device_flag == nullptr) return absl::InvalidArgumentError("device_flag is null");
  if (count > 0 && data == nullptr) return absl::InvalidArgumentError("data is null");
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  const ElementwiseOp op{.kind = ElementwiseKind::kFlagNonFinite,
                         .dtype = dtype,
                         .count = count,
                         .dst = device_flag,
                         .src = data,
                         .factor = nullptr,
                         .value = 0,
                         .limit = 0};
  return FromCuda(internal::LaunchElementwise(op, -1, stream), "inf/nan check launch");
}

absl::Status RunElementwise(const ElementwiseOp& op, int device, void* stream) {
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  return FromCuda(internal::LaunchElementwise(op, device, stream),
                  absl::StrCat(Name(op.kind), " launch"));
}

absl::Status RunQuantize(const QuantizeOp& op, int device, void* stream) {
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  return FromCuda(internal::LaunchQuantize(op, device, stream), "Quantize launch");
}

absl::Status RunDequantizeSum(const DequantizeOp& op, int device, void* stream) {
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  return FromCuda(internal::LaunchDequantizeSum(op, device, stream), "DequantizeSum launch");
}

}  // namespace zero::cuda
