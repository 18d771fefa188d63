// Quantization on the device a stream belongs to (quantize_op.h): a task of
// the host stream over the CPU pool, CUDA kernels on a card's stream, or
// nothing on meta devices. Both run quantize_rule.h, so host and card give
// the same bytes and, summing in the same order, the same sums.
#pragma once

#include "absl/status/status.h"
#include "compute/quantize_op.h"
#include "memory/backend.h"
#include "memory/stream.h"

namespace zero {

// InvalidArgument naming what is wrong: bits other than 4 or 8, a block
// that is not a positive even number, a bad dtype, null buffers with
// count > 0, parts < 1.
absl::Status ValidateQuantFormat(const QuantFormat& format);
absl::Status ValidateQuantize(const QuantizeOp& op);
absl::Status ValidateDequantize(const DequantizeOp& op);

// Enqueue on `stream`; the buffers must stay valid until it has run.
absl::Status Quantize(DeviceKind kind, Stream& stream, const QuantizeOp& op);
absl::Status DequantizeSum(DeviceKind kind, Stream& stream, const DequantizeOp& op);

// The host loops, on the calling thread and the CPU pool (validated ops).
void QuantizeOnHost(const QuantizeOp& op);
void DequantizeSumOnHost(const DequantizeOp& op);

}  // namespace zero
