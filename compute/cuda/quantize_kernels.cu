// Quantization kernels over the loops of quantize_loops.h.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "compute/cuda/grid.h"
#include "compute/cuda/quantize_kernels.h"
#include "compute/quantize_loops.h"
#include "memory/cuda/current_device.h"

namespace zero::cuda::internal {
namespace {

using quantize_detail::BlockAbsMax;
using quantize_detail::ByDType;
using quantize_detail::QuantizePairs;
using quantize_detail::StoreElement;
using quantize_detail::SumAt;

template <class T>
__global__ void QuantizeKernel(QuantizeOp op) {
  __shared__ float lanes[kThreads];
  __shared__ float scale;
  const size_t block = op.format.block;
  const size_t blocks = QuantBlocks(op.count, op.format);
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t begin = b * block, end = begin + block < op.count ? begin + block : op.count;
    lanes[threadIdx.x] = BlockAbsMax<T>(op, begin, end, threadIdx.x, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0) {
      float m = 0;
      for (unsigned t = 0; t < blockDim.x; ++t) m = (lanes[t] > m || lanes[t] != lanes[t]) ? lanes[t] : m;
      scale = BlockScale(m, op.format);
      QuantScales(op.dst)[b] = scale;
    }
    __syncthreads();
    QuantizePairs<T>(op, scale, begin, end, threadIdx.x, blockDim.x);
    __syncthreads();  // lanes and scale are reused by the next block
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const size_t used = 4 * blocks + QuantPayloadBytes(op.count, op.format);
    auto* bytes = static_cast<uint8_t*>(op.dst);
    for (size_t i = used; i < QuantizedBytes(op.count, op.format); ++i) bytes[i] = 0;
  }
}

template <int kBits, class T>
__global__ void DequantizeSumKernel(DequantizeOp op) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < op.count; i += stride) {
    StoreElement<T>(op.dst, i, SumAt<kBits>(op, i, i / op.format.block));
  }
}

template <class Launch>
int OnStreamCard(int device, void* stream, Launch launch) {
  const auto st = static_cast<cudaStream_t>(stream);
  const ScopedDevice on(st != nullptr ? ScopedDevice::OrdinalOf(st) : device);
  if (on.status() != cudaSuccess) return on.status();
  (void)cudaGetLastError();  // an earlier call's error is not this launch's
  launch(st);
  return cudaGetLastError();
}

}  // namespace

int LaunchQuantize(const QuantizeOp& op, int device, void* stream) {
  if (op.count == 0) return cudaSuccess;
  const size_t blocks = QuantBlocks(op.count, op.format);
  const unsigned grid = static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
  return OnStreamCard(device, stream, [&](cudaStream_t st) {
    ByDType(op.dtype, [&](auto type) {
      QuantizeKernel<decltype(type)><<<grid, kThreads, 0, st>>>(op);
    });
  });
}

int LaunchDequantizeSum(const DequantizeOp& op, int device, void* stream) {
  if (op.count == 0) return cudaSuccess;
  return OnStreamCard(device, stream, [&](cudaStream_t st) {
    ByDType(op.dtype, [&](auto type) {
      using T = decltype(type);
      if (op.format.bits == 8) {
        DequantizeSumKernel<8, T><<<BlocksFor(op.count), kThreads, 0, st>>>(op);
      } else {
        DequantizeSumKernel<4, T><<<BlocksFor(op.count), kThreads, 0, st>>>(op);
      }
    });
  });
}

}  // namespace zero::cuda::internal
