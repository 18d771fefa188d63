#pragma once

#include <cuda_runtime_api.h>

#include "bazel/example/axpy_params.h"

namespace example {
// y[i] += p.a * x[i] for host arrays x, y of p.n floats, computed on device 0.
cudaError_t AxpyOnDevice(AxpyParams p, const float* x, float* y);
}  // namespace example
