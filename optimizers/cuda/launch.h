// Host entry points of the CUDA optimizer kernels. Plain C++: no CUDA types
// (a stream is a cudaStream_t passed as void*; nullptr = default stream).
// Launches are asynchronous: pointers must be device-accessible and stay valid
// until the stream has run the work; errors the kernel meets surface on a
// later synchronize. Without a driver or a card every call returns an error
// (FailedPrecondition for "no device"), never aborts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "optimizers/adam_rule.h"
#include "optimizers/elementwise_op.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd_rule.h"

namespace zero::cuda {

// Number of usable cards: 0 without a driver (never an error).
int DeviceCount();

// One fused update of `args` (validated with ValidateStepArgs) on `stream`.
absl::Status StepAdam(const AdamScalars& scalars, const StepArgs& args, void* stream);
absl::Status StepSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args, void* stream);

// Sets *device_flag (device memory) to 1 if any of the `count` elements at
// `data` is inf or NaN; leaves it alone otherwise, so one flag can gather many
// buffers. The caller zeroes it first.
absl::Status FlagInfOrNan(const void* data, DType dtype, size_t count, int32_t* device_flag,
                          void* stream);

// Enqueues one element-wise operation (validated: ElementwiseExecutor) on
// `stream`, on the stream's own card (`device` picks the card only for the
// null stream; -1: the current card). Every launch here restores the
// caller's current card.
// Orders and kernels: cuda/elementwise_kernels.h.
absl::Status RunElementwise(const ElementwiseOp& op, int device, void* stream);

}  // namespace zero::cuda
