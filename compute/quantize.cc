#include "compute/quantize.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "compute/cuda/launch.h"
#include "compute/on_device.h"
#include "compute/parallel.h"
#include "compute/quantize_loops.h"

namespace zero {

using quantize_detail::BlockAbsMax;
using quantize_detail::QuantizePairs;
using quantize_detail::StoreElement;
using quantize_detail::SumAt;

absl::Status ValidateQuantFormat(const QuantFormat& format) {
  if (format.bits != 8 && format.bits != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("quantization: unknown bit width %d (8 or 4)", format.bits));
  }
  if (format.block == 0 || format.block % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "quantization: block of %d elements (a positive even number)", format.block));
  }
  return absl::OkStatus();
}

namespace {

absl::Status CheckCommon(const char* what, DType dtype, size_t count, const void* src,
                         const void* dst) {
  if (!IsValid(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unknown dtype %d", what, static_cast<int>(dtype)));
  }
  if (count > 0 && (src == nullptr || dst == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s of %d elements: a null buffer", what,
                                                      count));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateQuantize(const QuantizeOp& op) {
  if (absl::Status s = ValidateQuantFormat(op.format); !s.ok()) return s;
  return CheckCommon("quantize", op.dtype, op.count, op.src, op.dst);
}

absl::Status ValidateDequantize(const DequantizeOp& op) {
  if (absl::Status s = ValidateQuantFormat(op.format); !s.ok()) return s;
  if (op.parts < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dequantize: %d parts (at least 1)", op.parts));
  }
  if (op.part_stride != 0 && op.part_stride < QuantizedBytes(op.count, op.format)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dequantize: parts %d bytes apart overlap (each is %d bytes)", op.part_stride,
        QuantizedBytes(op.count, op.format)));
  }
  return CheckCommon("dequantize", op.dtype, op.count, op.src, op.dst);
}

void QuantizeOnHost(const QuantizeOp& op) {
  if (op.count == 0) return;
  const size_t block = op.format.block;
  const size_t blocks = QuantBlocks(op.count, op.format);
  float* scales = QuantScales(op.dst);
  ParallelFor(blocks, [&](size_t first, size_t last) {
    for (size_t b = first; b < last; ++b) {
      const size_t begin = b * block, end = begin + block < op.count ? begin + block : op.count;
      scales[b] = BlockScale(BlockAbsMax(op, begin, end, 0, 1), op.format);
      QuantizePairs(op, scales[b], begin, end, 0, 1);
    }
  }, ChunkPolicy{.min_chunk = 8, .multiple = 1});
  // The padding to whole words is zeros, so equal chunks are equal bytes.
  const size_t used = 4 * blocks + QuantPayloadBytes(op.count, op.format);
  std::memset(static_cast<char*>(op.dst) + used, 0, QuantizedBytes(op.count, op.format) - used);
}

void DequantizeSumOnHost(const DequantizeOp& op) {
  ParallelFor(op.count, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) StoreElement(op.dst, op.dtype, i, SumAt(op, i));
  });
}

absl::Status Quantize(DeviceKind kind, Stream& stream, const QuantizeOp& op) {
  if (absl::Status s = ValidateQuantize(op); !s.ok()) return s;
  return RunOnDevice(
      kind, stream, [op] { QuantizeOnHost(op); },
      [&op](int device, void* native) { return cuda::RunQuantize(op, device, native); });
}

absl::Status DequantizeSum(DeviceKind kind, Stream& stream, const DequantizeOp& op) {
  if (absl::Status s = ValidateDequantize(op); !s.ok()) return s;
  return RunOnDevice(
      kind, stream, [op] { DequantizeSumOnHost(op); },
      [&op](int device, void* native) { return cuda::RunDequantizeSum(op, device, native); });
}

}  // namespace zero
