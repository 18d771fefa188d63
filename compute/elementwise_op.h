// One element-wise operation of the engine (widen, narrow, accumulate, fill,
// scale, sum of squares, inf/NaN flag) as plain data: what the executor
// (elementwise_executor.h) validates and hands to the CPU runner
// (cpu/run_elementwise.h) or the CUDA kernels (cuda/elementwise_kernels.h).
// No abseil and no CUDA types, so nvcc and every layer can include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

namespace zero {

enum class ElementwiseKind : uint8_t {
  // Maps: dst[i] = f(dst[i], src[i], scalar), independent per element.
  kWiden = 0,       // float dst[i] = float(dtype src[i])
  kNarrow = 1,      // dtype dst[i] = dtype(float src[i])
  kAccumulate = 2,  // dtype dst[i] = dtype(float(dst[i]) + float src[i]): one rounding
  kFill = 3,        // dtype dst[i] = dtype(value)
  kScale = 4,       // dtype dst[i] = dtype(float(dst[i]) * *factor): factor read when it runs
  // Reductions into one scalar in memory.
  kSumOfSquares = 5,   // double *dst += sum of double(src[i])^2
  kFlagNonFinite = 6,  // int32 *dst = 1 if any src[i] is inf or NaN; untouched otherwise
  // The scalars that decide a step, from `count` gathered fp64 partial sums
  // of squares: StepScalars *dst (see StepScalarsOf, elementwise_rules.h).
  kStepScalars = 7,
};
inline constexpr int kNumMapKinds = 5;  // the kinds below kSumOfSquares
inline constexpr int kNumElementwiseKinds = 8;

constexpr bool IsMap(ElementwiseKind kind) {
  return static_cast<int>(kind) < kNumMapKinds;
}

constexpr const char* Name(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::kWiden: return "Widen";
    case ElementwiseKind::kNarrow: return "Narrow";
    case ElementwiseKind::kAccumulate: return "AccumulateNarrow";
    case ElementwiseKind::kFill: return "Fill";
    case ElementwiseKind::kScale: return "Scale";
    case ElementwiseKind::kSumOfSquares: return "SumOfSquares";
    case ElementwiseKind::kFlagNonFinite: return "FlagNonFinite";
    case ElementwiseKind::kStepScalars: return "StepScalars";
  }
  return "invalid";
}

// What kStepScalars writes, in device memory: the optimizer reads
// grad_scale there when it runs, so the host need not see it.
struct StepScalars {
  double norm;       // global L2 norm of the mean gradient (not finite on overflow)
  float grad_scale;  // the mean's scale, times the clip coefficient when it is < 1
};

// Pointers are device memory of the stream's device (host memory on host
// devices). `dtype` is the model-dtype side; the other side of widen, narrow
// and accumulate is fp32. dst and src must not overlap.
struct ElementwiseOp {
  ElementwiseKind kind;
  DType dtype;
  size_t count;
  void* dst;               // the elements written, or the scalar a reduction updates
  const void* src;         // the elements read; null for fill and scale
  const float* factor;     // scale only
  float value;             // fill; step scalars: the mean's grad scale
  double limit = 0;        // step scalars only: max_norm, 0 = no clipping
};

}  // namespace zero
