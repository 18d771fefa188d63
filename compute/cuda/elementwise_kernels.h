// The nvcc-compiled side of the element-wise operations (elementwise_op.h):
// no CUDA and no abseil types. Use launch.h, not this.
//
// Maps are grid-stride kernels over packs of 8 elements (16-byte loads of
// 2-byte types, two of fp32) when every pointer is 16-byte aligned, and the
// same kernels with element loads otherwise; the rules are elementwise_rules.h.
//
// The sum of squares adds in a fixed order that depends only on the count:
// thread t of the grid (BlocksFor(count / 8) blocks, cuda/grid.h) adds, in
// fp64, the elements of packs t, t + grid, t + 2 grid, ... in element order
// (then tail element 8 * (count / 8) + t, if any); each block adds its
// threads' sums in a fixed tree; one more block adds the block sums in a
// fixed order (thread t: blocks t, t + 256, ...; then the same tree) and adds
// the total to *dst. Same bits on every card and rank; not the host's order
// (cpu/run_elementwise.h), so host and card sums differ in the last bits.
// Its block sums live in a buffer from cudaMallocAsync on the stream (8 bytes
// a block, at most 32 KiB), freed on the stream after the final pass.
#pragma once

#include "compute/elementwise_op.h"

namespace zero::cuda::internal {

// Enqueues `op` (validated) on `stream` (a cudaStream_t), launched on the
// stream's own card (`device`, a CUDA ordinal, only for the null stream; -1:
// the current card); the caller's card is current again after. Returns a
// cudaError_t value.
int LaunchElementwise(const ElementwiseOp& op, int device, void* stream);

// cudaGetDeviceCount's error (0 when it answered) and count.
int DeviceCount(int* count);
// cudaGetErrorString of a cudaError_t value.
const char* ErrorString(int error);

}  // namespace zero::cuda::internal
