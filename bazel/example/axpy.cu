#include "bazel/example/axpy.h"

#include <cuda/std/span>  // from include/cccl

namespace example {
namespace {
__global__ void AxpyKernel(AxpyParams p, const float* x, float* y) {
  cuda::std::span<float> ys(y, p.n);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) ys[i] += p.a * x[i];
}
}  // namespace

cudaError_t AxpyOnDevice(AxpyParams p, const float* x, float* y) {
  const size_t bytes = sizeof(float) * p.n;
  float *dx = nullptr, *dy = nullptr;
  cudaError_t err = cudaMalloc(&dx, bytes);
  if (err == cudaSuccess) err = cudaMalloc(&dy, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    AxpyKernel<<<(p.n + 255) / 256, 256>>>(p, dx, dy);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return err;
}
}  // namespace example
