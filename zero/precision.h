// Host loops that move gradients and parameters between the model dtype
// (fp32, bf16 or fp16) and fp32, where the engine does its arithmetic. Each
// rounds exactly as the optimizers' parameter copies do (nearest, ties to
// even), so every stage that calls them gets the same bits. Host memory;
// the caller has synchronized the stream that wrote it. Blocking forms of
// the element-wise operations (compute/elementwise_executor.h runs them
// on a stream), through the same CPU runner (compute/cpu/run_elementwise.h).
#pragma once

#include <cstddef>

#include "base/dtype.h"

namespace zero {

// dst[i] = float(src[i]).
void Widen(const void* src, DType dtype, float* dst, size_t count);
// dst[i] = dtype(src[i]).
void Narrow(const float* src, void* dst, DType dtype, size_t count);
// into[i] = dtype(float(into[i]) + from[i]): one rounding per add.
void AccumulateNarrow(void* into, DType dtype, const float* from, size_t count);
// Sum of squares in fp64, in element order.
double SumOfSquares(const void* src, DType dtype, size_t count);

}  // namespace zero
