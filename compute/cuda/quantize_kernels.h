// The nvcc-compiled side of quantization (quantize_op.h): no CUDA and no
// abseil types. Use launch.h, not this.
//
// Quantize: one thread block per quantization block (grid-stride beyond
// kMaxBlocks), its threads share the block's elements for the absmax (a max,
// so the order does not matter) and then quantize pairs; thread 0 of block
// 0 zeroes the padding. Dequantize-and-sum: a thread per element, the parts
// added in order as on the host. Both run quantize_loops.h: the host's bytes
// and bits.
#pragma once

#include "compute/quantize_op.h"

namespace zero::cuda::internal {

// Enqueue on `stream` (a cudaStream_t; `device` picks the card of the null
// stream, -1: the current one); validated ops. A cudaError_t value.
int LaunchQuantize(const QuantizeOp& op, int device, void* stream);
int LaunchDequantizeSum(const DequantizeOp& op, int device, void* stream);

}  // namespace zero::cuda::internal
