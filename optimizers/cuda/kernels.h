// The nvcc-compiled side of the CUDA optimizer kernels: plain functions with
// no CUDA and no abseil types, so kernels.cu needs neither abseil under nvcc
// nor launch.cc the CUDA headers. Use launch.h, not this.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "compute/elementwise.h"
#include "optimizers/adam_rule.h"
#include "optimizers/sgd_rule.h"

namespace zero::cuda::internal {

// Each returns a cudaError_t value (0 = success). `stream` is a cudaStream_t.
int LaunchAdam(const AdamScalars& s, const RawLanes& lanes, DType grad, int copy_slot, size_t n,
               void* stream);
int LaunchSgd(const SgdScalars& s, bool momentum, const RawLanes& lanes, DType grad, int copy_slot,
              size_t n, void* stream);

}  // namespace zero::cuda::internal
