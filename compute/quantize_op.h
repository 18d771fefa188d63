// One quantize or dequantize-and-sum operation (quantize_rule.h) as plain
// data, for the executor (quantize.h), the CPU loops and the CUDA kernels.
// No abseil and no CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "compute/quantize_rule.h"

namespace zero {

// dst (QuantizedBytes(count) bytes) = the quantized chunk of src (count
// elements of dtype). With `residual` (count fp32, error feedback) the
// chunk quantizes src + residual, and residual becomes what it lost:
// (src + residual) - read back. Element i's stochastic index is
// index_base + i. src, dst and residual must not overlap.
struct QuantizeOp {
  DType dtype;
  size_t count;
  const void* src;
  void* dst;
  QuantFormat format;
  uint64_t index_base = 0;
  float* residual = nullptr;
};

// dst (count elements of dtype) = the sum, in order, of the `parts`
// quantized chunks of count elements at src, part p at p * part_stride
// bytes (0: back to back, QuantizedBytes(count)), each
// read back in fp32, added in fp32 and rounded once (parts == 1: read
// back).
struct DequantizeOp {
  DType dtype;
  size_t count;
  int parts;
  const void* src;
  void* dst;
  QuantFormat format;
  size_t part_stride = 0;
};

}  // namespace zero
