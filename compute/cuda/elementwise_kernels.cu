// The element-wise kernels: the rules of elementwise_rules.h over the
// arithmetic policy of cuda/ops.h, in the orders elementwise_kernels.h states.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "compute/cuda/elementwise_kernels.h"
#include "compute/cuda/grid.h"
#include "compute/cuda/ops.h"
#include "compute/elementwise_rules.h"
#include "memory/cuda/current_device.h"

namespace zero::cuda::internal {
namespace {

constexpr size_t kPack = 8;  // elements a thread takes per step

// Copies one pack; 16-byte words when both sides are 16-byte aligned.
template <bool kAligned, class T>
__device__ ZERO_INLINE void CopyPack(T* to, const T* from) {
  if constexpr (kAligned) {
    constexpr int kWords = kPack * sizeof(T) / 16;
    static_assert(kWords * 16 == kPack * sizeof(T));
    for (int w = 0; w < kWords; ++w) {
      reinterpret_cast<uint4*>(to)[w] = reinterpret_cast<const uint4*>(from)[w];
    }
  } else {
    for (size_t k = 0; k < kPack; ++k) to[k] = from[k];
  }
}

__device__ ZERO_INLINE size_t GridThread() { return size_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ ZERO_INLINE size_t GridSize() { return size_t{gridDim.x} * blockDim.x; }

template <class Rule, bool kAligned>
__global__ void MapKernel(ElementwiseOp op) {
  using D = typename Rule::Dst;
  using S = typename Rule::Src;
  auto* dst = static_cast<D*>(op.dst);
  const auto* src = static_cast<const S*>(op.src);
  const float scalar = ScalarOf(op);
  const size_t packs = op.count / kPack;
  for (size_t j = GridThread(); j < packs; j += GridSize()) {
    alignas(16) D d[kPack];
    alignas(16) S s[kPack];
    if constexpr (Rule::kReadsDst) CopyPack<kAligned>(d, dst + j * kPack);
    if constexpr (!std::is_same_v<S, NoSource>) CopyPack<kAligned>(s, src + j * kPack);
    for (size_t k = 0; k < kPack; ++k) MapAt<Ops, Rule>(d, s, scalar, k);
    CopyPack<kAligned>(dst + j * kPack, d);
  }
  const size_t tail = packs * kPack + GridThread();
  if (tail < op.count) MapAt<Ops, Rule>(dst, src, scalar, tail);
}

// The block's values added in a fixed tree; every thread gets the total.
__device__ double BlockSum(double v) {
  __shared__ double lanes[kThreads];
  lanes[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) lanes[threadIdx.x] += lanes[threadIdx.x + half];
    __syncthreads();
  }
  return lanes[0];
}

template <class T, bool kAligned>
__global__ void SumOfSquaresKernel(const T* x, size_t count, double* block_sums) {
  const size_t packs = count / kPack;
  double sum = 0;
  for (size_t j = GridThread(); j < packs; j += GridSize()) {
    alignas(16) T v[kPack];
    CopyPack<kAligned>(v, x + j * kPack);
    for (size_t k = 0; k < kPack; ++k) sum = AddSquare(sum, Ops::Load(v + k));
  }
  const size_t tail = packs * kPack + GridThread();
  if (tail < count) sum = AddSquare(sum, Ops::Load(x + tail));
  const double block = BlockSum(sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = block;
}

__global__ void AddBlockSums(const double* block_sums, unsigned blocks, double* total) {
  double sum = 0;
  for (unsigned b = threadIdx.x; b < blocks; b += kThreads) sum += block_sums[b];
  const double all = BlockSum(sum);
  if (threadIdx.x == 0) *total += all;
}

template <class T, bool kAligned>
__global__ void FlagNonFiniteKernel(const T* x, size_t count, int32_t* flag) {
  using Bits = typename ExponentField<T>::Bits;
  const Bits* b = reinterpret_cast<const Bits*>(x);
  const size_t packs = count / kPack;
  bool any = false;
  for (size_t j = GridThread(); j < packs; j += GridSize()) {
    alignas(16) Bits v[kPack];
    CopyPack<kAligned>(v, b + j * kPack);
    for (size_t k = 0; k < kPack; ++k) any |= IsNonFinite<T>(v[k]);
  }
  const size_t tail = packs * kPack + GridThread();
  if (tail < count) any |= IsNonFinite<T>(b[tail]);
  if (__syncthreads_or(any) && threadIdx.x == 0) *flag = 1;
}

// A handful of partials: one thread, the host's order and operations.
__global__ void StepScalarsKernel(ElementwiseOp op) {
  *static_cast<StepScalars*>(op.dst) =
      StepScalarsOf(static_cast<const double*>(op.src), op.count, op.value, op.limit);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int LaunchSumOfSquares(const ElementwiseOp& op, bool aligned, cudaStream_t stream) {
  const unsigned blocks = BlocksFor(op.count / kPack);
  double* block_sums = nullptr;
  cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&block_sums),
                                  blocks * sizeof(double), stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // returned here: not left for the next check
    return e;
  }
  VisitDType(op.dtype, [&]<class T>() {
    const T* x = static_cast<const T*>(op.src);
    if (aligned) {
      SumOfSquaresKernel<T, true><<<blocks, kThreads, 0, stream>>>(x, op.count, block_sums);
    } else {
      SumOfSquaresKernel<T, false><<<blocks, kThreads, 0, stream>>>(x, op.count, block_sums);
    }
  });
  e = cudaGetLastError();
  if (e == cudaSuccess) {
    AddBlockSums<<<1, kThreads, 0, stream>>>(block_sums, blocks, static_cast<double*>(op.dst));
    e = cudaGetLastError();
  }
  const cudaError_t freed = cudaFreeAsync(block_sums, stream);
  return e != cudaSuccess ? e : freed;
}

int Launch(const ElementwiseOp& op, cudaStream_t stream) {
  const bool aligned = Aligned16(op.dst) && (op.src == nullptr || Aligned16(op.src));
  const unsigned blocks = BlocksFor(op.count / kPack);
  if (op.kind == ElementwiseKind::kSumOfSquares) {
    return LaunchSumOfSquares(op, Aligned16(op.src), stream);
  }
  if (op.kind == ElementwiseKind::kStepScalars) {
    StepScalarsKernel<<<1, 1, 0, stream>>>(op);
  } else if (op.kind == ElementwiseKind::kFlagNonFinite) {
    VisitDType(op.dtype, [&]<class T>() {
      const T* x = static_cast<const T*>(op.src);
      auto* flag = static_cast<int32_t*>(op.dst);
      if (Aligned16(x)) {
        FlagNonFiniteKernel<T, true><<<blocks, kThreads, 0, stream>>>(x, op.count, flag);
      } else {
        FlagNonFiniteKernel<T, false><<<blocks, kThreads, 0, stream>>>(x, op.count, flag);
      }
    });
  } else {
    VisitMapRule(op.kind, op.dtype, [&]<class Rule>() {
      if (aligned) {
        MapKernel<Rule, true><<<blocks, kThreads, 0, stream>>>(op);
      } else {
        MapKernel<Rule, false><<<blocks, kThreads, 0, stream>>>(op);
      }
    });
  }
  return cudaGetLastError();
}

}  // namespace

int LaunchElementwise(const ElementwiseOp& op, int device, void* stream) {
  if (op.count == 0) return cudaSuccess;
  const auto st = static_cast<cudaStream_t>(stream);
  // The stream's own card; `device` only picks the card of the default stream.
  const ScopedDevice on(st != nullptr ? ScopedDevice::OrdinalOf(st) : device);
  if (on.status() != cudaSuccess) return on.status();
  (void)cudaGetLastError();  // an earlier call's error is not this launch's (kernels.cu)
  return Launch(op, st);
}

int DeviceCount(int* count) { return cudaGetDeviceCount(count); }

const char* ErrorString(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

}  // namespace zero::cuda::internal
