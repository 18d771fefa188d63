// Arithmetic policy for the update rules: one fp32 element at a time. The
// reference every SIMD level must match bit for bit. Only for
// cpu/kernels_scalar.cc (see kernels_impl.h on why ops stay in one TU each).
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "base/host_device.h"

namespace zero::cpu::scalar {

struct Ops {
  using V = float;
  using M = bool;
  static constexpr size_t kWidth = 1;

  static ZERO_INLINE V Zero() { return 0.0f; }
  static ZERO_INLINE V Set(float x) { return x; }
  static ZERO_INLINE M MaskOf(bool b) { return b; }

  static ZERO_INLINE V Load(const float* p) { return *p; }
  static ZERO_INLINE V Load(const bf16* p) { return BF16ToFloat(*p); }
  static ZERO_INLINE V Load(const f16* p) { return F16ToFloat(*p); }
  static ZERO_INLINE void Store(float* p, V x) { *p = x; }
  static ZERO_INLINE void Store(bf16* p, V x) { *p = FloatToBF16(x); }
  static ZERO_INLINE void Store(f16* p, V x) { *p = FloatToF16(x); }

  // Built with -ffp-contract=off: no mul+add pair may fuse into an FMA.
  static ZERO_INLINE V Add(V a, V b) { return a + b; }
  static ZERO_INLINE V Sub(V a, V b) { return a - b; }
  static ZERO_INLINE V Mul(V a, V b) { return a * b; }
  static ZERO_INLINE V Div(V a, V b) { return a / b; }
  static ZERO_INLINE V Sqrt(V a) { return __builtin_sqrtf(a); }  // correctly rounded
  static ZERO_INLINE V Select(M m, V a, V b) { return m ? a : b; }
};

}  // namespace zero::cpu::scalar
