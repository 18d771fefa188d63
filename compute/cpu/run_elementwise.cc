#include "compute/cpu/run_elementwise.h"

#include <atomic>
#include <cstdint>

#include "compute/cpu/map_table.h"
#include "compute/elementwise_rules.h"
#include "compute/parallel.h"

namespace zero::cpu {

double SumOfSquares(const void* src, DType dtype, size_t count) {
  return VisitDType(dtype, [&]<class T>() {
    const T* x = static_cast<const T*>(src);
    double sum = 0;
    for (size_t i = 0; i < count; ++i) sum = AddSquare(sum, ToFloat(x[i]));
    return sum;
  });
}

const MapTable& MapsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return Avx512Maps();
    case CpuIsa::kAvx2:
      return Avx2Maps();
    default:
      return ScalarMaps();
  }
}

const MapTable& ActiveMaps() { return MapsFor(ActiveCpuIsa()); }

bool AnyNonFinite(const void* data, DType dtype, size_t count) {
  const NonFiniteFn fn = ActiveMaps().any_nonfinite[static_cast<int>(dtype)];
  std::atomic<bool> found{false};
  ParallelFor(count, [&](size_t begin, size_t end) {
    if (!found.load(std::memory_order_relaxed) && fn(data, begin, end)) {
      found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
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
        ActiveMaps().map[static_cast<int>(op.kind)][static_cast<int>(op.dtype)];
    const float scalar = ScalarOf(op);
    ParallelFor(op.count, [&](size_t begin, size_t end) { fn(op, scalar, begin, end); });
  }
}

}  // namespace zero::cpu
