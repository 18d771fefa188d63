#include "optimizers/cuda/launch.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "optimizers/cuda/elementwise_kernels.h"
#include "optimizers/cuda/kernels.h"
#include "optimizers/elementwise.h"
#include "optimizers/step_lanes.h"

namespace zero::cuda {
namespace {

absl::Status FromCuda(int error, std::string_view what) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(std::string(what), ": ", internal::ErrorString(error)));
}

absl::Status RequireDevice() {
  if (DeviceCount() > 0) return absl::OkStatus();
  return absl::FailedPreconditionError("no CUDA device (or no driver)");
}

}  // namespace

int DeviceCount() {
  int count = 0;
  return internal::DeviceCount(&count) == 0 ? count : 0;
}

absl::Status StepAdam(const AdamScalars& scalars, const StepArgs& args, void* stream) {
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  return FromCuda(
      internal::LaunchAdam(scalars, LanesOf(args), args.grad_dtype,
                           CopySlot(args.param_copy, args.copy_dtype), args.params.size(), stream),
      "Adam kernel launch");
}

absl::Status StepSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args, void* stream) {
  if (absl::Status s = RequireDevice(); !s.ok()) return s;
  return FromCuda(
      internal::LaunchSgd(scalars, momentum, LanesOf(args), args.grad_dtype,
                          CopySlot(args.param_copy, args.copy_dtype), args.params.size(), stream),
      "SGD kernel launch");
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

}  // namespace zero::cuda
