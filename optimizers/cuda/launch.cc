#include "optimizers/cuda/launch.h"

#include "compute/cuda/launch.h"
#include "compute/elementwise.h"
#include "optimizers/cuda/kernels.h"
#include "optimizers/step_lanes.h"

namespace zero::cuda {

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

}  // namespace zero::cuda
