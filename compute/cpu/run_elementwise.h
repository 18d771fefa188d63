// Runs one element-wise operation (elementwise_op.h) on the CPU, on the
// calling thread and the CPU pool (parallel.h), and returns when it is done.
// The operation must be valid (ElementwiseExecutor validates it). Host
// memory. The element-wise executor (elementwise_executor.h) runs this as
// ordered work on a host stream; zero/precision.h runs it in place.
//
// Results do not depend on the thread count or the SIMD level:
//  - maps are independent per element, so any split gives the same bits;
//  - the sum of squares adds in element order on one thread, in fp64,
//    starting from 0, and adds that total to *dst once (so a caller summing
//    several spans into one scalar adds span totals in call order). The
//    order is that of the host loops it replaces: not split, so the result
//    is bit-identical to them; it runs at one core's add latency, not at
//    memory bandwidth. CUDA sums in another fixed order (cuda/
//    elementwise_kernels.h): host and card sums differ in the last bits;
//  - the inf/NaN flag is a yes/no answer, found in any order.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "compute/elementwise_op.h"

namespace zero::cpu {

void RunElementwise(const ElementwiseOp& op);

// The sum of squares of `count` elements in fp64, in element order.
double SumOfSquares(const void* src, DType dtype, size_t count);

// True when any of the `count` elements at `data` is an infinity or a NaN.
bool AnyNonFinite(const void* data, DType dtype, size_t count);

}  // namespace zero::cpu
