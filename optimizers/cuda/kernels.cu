// Fused optimizer kernels: one pass reads params, grads and state and writes
// params, state and the optional copy. The update rules are the CPU's own
// (adam_rule.h, sgd_rule.h); Ops below pins every operation to IEEE
// round-to-nearest intrinsics so nvcc cannot contract a mul and an add into
// an FMA, which keeps results bit-identical to the CPU for finite values.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "optimizers/cuda/kernels.h"

namespace zero::cuda::internal {
namespace {

struct Ops {
  using V = float;
  using M = bool;

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

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 4096;  // grid-stride beyond this

unsigned BlocksFor(size_t n) {
  return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

template <class Kernel, class G, class C>
__global__ void RangeKernel(typename Kernel::Scalars scalars, RawLanes raw, size_t n) {
  const Kernel kernel(scalars);
  const Lanes<G, C> io = Typed<G, C>(raw);
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    ApplyAt<Ops>(kernel, io, i);
  }
}

template <template <class> class K>
int Launch(const typename K<Ops>::Scalars& s, const RawLanes& lanes, DType grad, int copy_slot,
           size_t n, void* stream) {
  if (n == 0) return cudaSuccess;
  const auto st = static_cast<cudaStream_t>(stream);
  VisitGradCopy(grad, copy_slot, [&]<class G, class C>() {
    RangeKernel<K<Ops>, G, C><<<BlocksFor(n), kThreads, 0, st>>>(s, lanes, n);
  });
  return cudaGetLastError();
}

// Sets *flag = 1 when any element's exponent bits are all ones (inf or NaN).
template <class Bits, Bits kExpMask>
__global__ void FlagNonFiniteKernel(const Bits* x, size_t n, int32_t* flag) {
  bool any = false;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    any |= (x[i] & kExpMask) == kExpMask;
  }
  if (__syncthreads_or(any) && threadIdx.x == 0) *flag = 1;
}

}  // namespace

int DeviceCount(int* count) { return cudaGetDeviceCount(count); }

int LaunchAdam(const AdamScalars& s, const RawLanes& lanes, DType grad, int copy_slot, size_t n,
               void* stream) {
  return Launch<AdamDynamicKernel>(s, lanes, grad, copy_slot, n, stream);
}

int LaunchSgd(const SgdScalars& s, bool momentum, const RawLanes& lanes, DType grad, int copy_slot,
              size_t n, void* stream) {
  return momentum ? Launch<SgdMomentumKernel>(s, lanes, grad, copy_slot, n, stream)
                  : Launch<SgdPlainKernel>(s, lanes, grad, copy_slot, n, stream);
}

int LaunchFlagNonFinite(const void* data, DType dtype, size_t n, int32_t* flag, void* stream) {
  if (n == 0) return cudaSuccess;
  const auto st = static_cast<cudaStream_t>(stream);
  if (dtype == DType::kF32) {
    FlagNonFiniteKernel<uint32_t, 0x7F800000u>
        <<<BlocksFor(n), kThreads, 0, st>>>(static_cast<const uint32_t*>(data), n, flag);
  } else {
    const auto* x = static_cast<const uint16_t*>(data);
    if (dtype == DType::kBF16) {
      FlagNonFiniteKernel<uint16_t, 0x7F80u><<<BlocksFor(n), kThreads, 0, st>>>(x, n, flag);
    } else {
      FlagNonFiniteKernel<uint16_t, 0x7C00u><<<BlocksFor(n), kThreads, 0, st>>>(x, n, flag);
    }
  }
  return cudaGetLastError();
}

const char* ErrorString(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

}  // namespace zero::cuda::internal
