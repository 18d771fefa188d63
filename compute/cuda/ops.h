// Arithmetic policy of the CUDA kernels (kernels.cu, elementwise_kernels.cu):
// one fp32 element per thread, every operation an IEEE round-to-nearest
// intrinsic so nvcc cannot contract a mul and an add into an FMA, which keeps
// results bit-identical to the CPU policies (cpu/ops_*.h) for finite values.
// Only for .cu files.
#pragma once

#include "base/dtype.h"
#include "base/host_device.h"

namespace zero::cuda {

struct Ops {
  using V = float;
  using M = bool;
  static constexpr size_t kWidth = 1;

  __device__ static ZERO_INLINE V Zero() { return 0.0f; }
  __device__ static ZERO_INLINE V Set(float x) { return x; }
  __device__ static ZERO_INLINE M MaskOf(bool b) { return b; }

  __device__ static ZERO_INLINE V Load(const float* p) { return *p; }
  __device__ static ZERO_INLINE V Load(const bf16* p) { return BF16ToFloat(*p); }
  __device__ static ZERO_INLINE V Load(const f16* p) { return F16ToFloat(*p); }
  __device__ static ZERO_INLINE void Store(float* p, V x) { *p = x; }
  __device__ static ZERO_INLINE void Store(bf16* p, V x) { *p = FloatToBF16(x); }
  __device__ static ZERO_INLINE void Store(f16* p, V x) { *p = FloatToF16(x); }

  __device__ static ZERO_INLINE V Add(V a, V b) { return __fadd_rn(a, b); }
  __device__ static ZERO_INLINE V Sub(V a, V b) { return __fsub_rn(a, b); }
  __device__ static ZERO_INLINE V Mul(V a, V b) { return __fmul_rn(a, b); }
  __device__ static ZERO_INLINE V Div(V a, V b) { return __fdiv_rn(a, b); }
  __device__ static ZERO_INLINE V Sqrt(V a) { return __fsqrt_rn(a); }
  __device__ static ZERO_INLINE V Select(M m, V a, V b) { return m ? a : b; }
};

}  // namespace zero::cuda
