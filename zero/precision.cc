#include "zero/precision.h"

#include "compute/cpu/run_elementwise.h"

namespace zero {
namespace {

void RunMap(ElementwiseKind kind, void* dst, const void* src, DType dtype, size_t count) {
  cpu::RunElementwise({.kind = kind, .dtype = dtype, .count = count, .dst = dst, .src = src,
                       .factor = nullptr, .value = 0});
}

}  // namespace

void Widen(const void* src, DType dtype, float* dst, size_t count) {
  RunMap(ElementwiseKind::kWiden, dst, src, dtype, count);
}

void Narrow(const float* src, void* dst, DType dtype, size_t count) {
  RunMap(ElementwiseKind::kNarrow, dst, src, dtype, count);
}

void AccumulateNarrow(void* into, DType dtype, const float* from, size_t count) {
  RunMap(ElementwiseKind::kAccumulate, into, from, dtype, count);
}

double SumOfSquares(const void* src, DType dtype, size_t count) {
  return cpu::SumOfSquares(src, dtype, count);
}

}  // namespace zero
