// Host entry points of the CUDA element-wise kernels. Plain C++: no CUDA
// types (a stream is a cudaStream_t passed as void*; nullptr = default
// stream). Launches are asynchronous: pointers must be device-accessible and
// stay valid until the stream has run the work; errors the kernel meets
// surface on a later synchronize. Without a driver or a card every call
// returns an error (FailedPrecondition for "no device"), never aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "compute/elementwise_op.h"
#include "compute/quantize_op.h"

namespace zero::cuda {

// Number of usable cards: 0 without a driver (never an error).
int DeviceCount();
// OK, or FailedPrecondition when there is no card (or no driver).
absl::Status RequireDevice();
// A cudaError_t value as a status: OK for 0, else Internal naming `what`.
absl::Status FromCuda(int error, std::string_view what);

// Sets *device_flag (device memory) to 1 if any of the `count` elements at
// `data` is inf or NaN; leaves it alone otherwise, so one flag can gather many
// buffers. The caller zeroes it first.
absl::Status FlagInfOrNan(const void* data, DType dtype, size_t count, int32_t* device_flag,
                          void* stream);

// Enqueues one element-wise operation (validated: ElementwiseExecutor) on
// `stream`, on the stream's own card (`device` picks the card only for the
// null stream; -1: the current card). Every launch here restores the
// caller's current card.
// Orders and kernels: cuda/elementwise_kernels.h.
absl::Status RunElementwise(const ElementwiseOp& op, int device, void* stream);

// Quantization (validated ops; kernels: cuda/quantize_kernels.h).
absl::Status RunQuantize(const QuantizeOp& op, int device, void* stream);
absl::Status RunDequantizeSum(const DequantizeOp& op, int device, void* stream);

}  // namespace zero::cuda
