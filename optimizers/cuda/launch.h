// Host entry points of the CUDA optimizer kernels (the element-wise ones and
// the card count are compute/cuda/launch.h's). Plain C++: no CUDA types (a
// stream is a cudaStream_t passed as void*; nullptr = default stream).
// Launches are asynchronous: pointers must be device-accessible and stay valid
// until the stream has run the work; errors the kernel meets surface on a
// later synchronize. Without a driver or a card every call returns an error
// (FailedPrecondition for "no device"), never aborts.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "optimizers/adam_rule.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd_rule.h"

namespace zero::cuda {

// One fused update of `args` (validated with ValidateStepArgs) on `stream`.
absl::Status StepAdam(const AdamScalars& scalars, const StepArgs& args, void* stream);
absl::Status StepSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args, void* stream);

}  // namespace zero::cuda
