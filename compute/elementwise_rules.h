// The arithmetic of the engine's element-wise operations (elementwise_op.h),
// written once over an arithmetic policy `Ops` (cpu/ops_*.h, cuda/ops.h) as
// the optimizer rules are (adam_rule.h): the scalar, AVX2, AVX-512 and CUDA
// paths store, round and add the same way and agree bit for bit. Rounding
// to the model dtype is Ops::Store's: nearest, ties to even (base/dtype.h),
// as the optimizers' parameter copies round. nvcc-compatible.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "base/host_device.h"
#include "compute/elementwise_op.h"

namespace zero {

// The source type of a map that reads only its destination.
struct NoSource {};

// One vector of a map: dst = Apply(dst, src, scalar). Dst and Src are the
// element types in memory; kReadsDst says whether dst is loaded first.
template <ElementwiseKind kKind, class T>
struct MapRule {
  static_assert(IsMap(kKind));
  using Dst = std::conditional_t<kKind == ElementwiseKind::kWiden, float, T>;
  using Src = std::conditional_t<
      kKind == ElementwiseKind::kWiden, T,
      std::conditional_t<kKind == ElementwiseKind::kFill || kKind == ElementwiseKind::kScale,
                         NoSource, float>>;
  static constexpr bool kReadsDst =
      kKind == ElementwiseKind::kAccumulate || kKind == ElementwiseKind::kScale;

  template <class Ops, class V = typename Ops::V>
  ZERO_HD static ZERO_INLINE V Apply(V dst, V src, V scalar) {
    if constexpr (kKind == ElementwiseKind::kAccumulate) {
      return Ops::Add(dst, src);
    } else if constexpr (kKind == ElementwiseKind::kScale) {
      return Ops::Mul(dst, scalar);
    } else if constexpr (kKind == ElementwiseKind::kFill) {
      return scalar;
    } else {
      return src;  // widen and narrow: the conversion is the load and the store
    }
  }
};

// The map's scalar: the fill value, or the scale factor read from (device)
// memory at the time the operation runs, never when it is enqueued.
ZERO_HD inline float ScalarOf(const ElementwiseOp& op) {
  return op.kind == ElementwiseKind::kScale ? *op.factor : op.value;
}

// Applies `Rule` to the Ops::kWidth elements at index i. Always inlined: the
// SIMD translation units instantiate it too (cpu/kernels_impl.h).
template <class Ops, class Rule>
ZERO_HD ZERO_INLINE void MapAt(typename Rule::Dst* dst, const typename Rule::Src* src,
                               typename Ops::V scalar, size_t i) {
  using V = typename Ops::V;
  V d = Ops::Zero();
  V s = Ops::Zero();
  if constexpr (Rule::kReadsDst) d = Ops::Load(dst + i);
  if constexpr (!std::is_same_v<typename Rule::Src, NoSource>) s = Ops::Load(src + i);
  Ops::Store(dst + i, Rule::template Apply<Ops>(d, s, scalar));
}

// Calls f.template operator()<MapRule<kind, T>>() for a map kind and the
// element type of `dtype`: the one place run-time kinds become rules.
template <class T, class F>
decltype(auto) VisitMapKind(ElementwiseKind kind, F& f) {
  using K = ElementwiseKind;
  switch (kind) {
    case K::kWiden: return f.template operator()<MapRule<K::kWiden, T>>();
    case K::kNarrow: return f.template operator()<MapRule<K::kNarrow, T>>();
    case K::kAccumulate: return f.template operator()<MapRule<K::kAccumulate, T>>();
    case K::kFill: return f.template operator()<MapRule<K::kFill, T>>();
    default: return f.template operator()<MapRule<K::kScale, T>>();
  }
}

template <class F>
decltype(auto) VisitMapRule(ElementwiseKind kind, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16: return VisitMapKind<bf16>(kind, f);
    case DType::kF16: return VisitMapKind<f16>(kind, f);
    default: return VisitMapKind<float>(kind, f);
  }
}

// Calls f.template operator()<T>() with the element type of `dtype`.
template <class F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16: return f.template operator()<bf16>();
    case DType::kF16: return f.template operator()<f16>();
    default: return f.template operator()<float>();
  }
}

// One term of a sum of squares in fp64. The square of an fp32 value is exact
// in fp64 (24-bit significands give 48 bits, well inside the range), so a
// compiler that fuses the multiply and add into an FMA changes no bit.
ZERO_HD ZERO_INLINE double AddSquare(double sum, float x) {
  const double v = x;
  return sum + v * v;
}

// fp64 operations rounded to nearest one by one: nvcc would otherwise fuse
// a multiply and an add into an FMA, and the host compiler does not.
ZERO_HD ZERO_INLINE double MulRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
ZERO_HD ZERO_INLINE double AddRn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
ZERO_HD ZERO_INLINE double SqrtRn(double a) {
#if defined(__CUDA_ARCH__)
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// The step's scalars from every rank's partial sum of squares (added in rank
// order, so every rank gets the same bits): the norm of the mean gradient,
// and torch's clip_grad_norm_ coefficient max_norm / (norm + 1e-6), applied
// to `mean_scale` only when below 1 (or NaN), in fp64 and rounded once to fp32.
ZERO_HD inline StepScalars StepScalarsOf(const double* partials, size_t ranks, float mean_scale,
                                        double max_norm) {
  double total = 0;
  for (size_t r = 0; r < ranks; ++r) total = AddRn(total, partials[r]);
  const double norm = MulRn(SqrtRn(total), mean_scale);
  float grad_scale = mean_scale;
  if (max_norm > 0) {
    const double coef = max_norm / AddRn(norm, 1e-6);  // fp64 division is IEEE on both
    // torch.clamp(coef, max=1) keeps a NaN (a NaN norm): every gradient
    // becomes NaN, not only the non-finite ones.
    if (!(coef >= 1.0)) grad_scale = static_cast<float>(MulRn(mean_scale, coef));
  }
  return {.norm = norm, .grad_scale = grad_scale};
}

// The bits of a T, and its exponent field: all ones exactly for inf and NaN.
template <class T>
struct ExponentField;
template <>
struct ExponentField<float> {
  using Bits = uint32_t;
  static constexpr Bits kMask = 0x7F800000u;
};
template <>
struct ExponentField<bf16> {
  using Bits = uint16_t;
  static constexpr Bits kMask = 0x7F80u;
};
template <>
struct ExponentField<f16> {
  using Bits = uint16_t;
  static constexpr Bits kMask = 0x7C00u;
};

template <class T>
ZERO_HD ZERO_INLINE bool IsNonFinite(typename ExponentField<T>::Bits bits) {
  return (bits & ExponentField<T>::kMask) == ExponentField<T>::kMask;
}

}  // namespace zero
