#include "optimizers/cpu/run_elementwise.h"

#include <cstdint>

#include "optimizers/cpu/isa.h"
#include "optimizers/cpu/kernel_table.h"
#include "optimizers/cpu/run.h"
#include "optimizers/elementwise_rules.h"
#include "optimizers/parallel.h"

namespace zero::cpu {

double SumOfSquares(const void* src, DType dtype, size_t count) {
  return VisitDType(dtype, [&]<class T>() {
    const T* x = static_cast<const T*>(src);
    double sum = 0;
    for (size_t i = 0; i < count; ++i) sum = AddSquare(sum, ToFloat(x[i]));
    return sum;
  });
}

void RunElementwise(const ElementwiseOp& op) {
  if (op.kind == ElementwiseKind::kSumOfSquares) {
    *static_cast<double*>(op.dst) += SumOfSquares(op.src, op.dtype, op.count);
  } else if (op.kind == ElementwiseKind::kStepScalars) {
    *static_cast<StepScalars*>(op.dst) =
        StepScalarsOf(static_cast<const double*>(op.src), op.count, op.value, op.limit);
  } else if (op.kind == ElementwiseKind::kFlagNonFinite) {
    if (AnyNonFinite(op.src, op.dtype, op.count)) *static_cast<int32_t*>(op.dst) = 1;
  } else {
    const MapFn fn =
        ActiveKernels().map[static_cast<int>(op.kind)][static_cast<int>(op.dtype)];
    const float scalar = ScalarOf(op);
    ParallelFor(op.count, [&](size_t begin, size_t end) { fn(op, scalar, begin, end); });
  }
}

}  // namespace zero::cpu
