#include "compute/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "compute/cuda/launch.h"
#include "compute/on_device.h"
#include "compute/parallel.h"

namespace zero {


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

namespace {

// The host's loops, a block at a time with the element type and the width
// fixed, so the compiler keeps them in registers and vectorizes them; the
// arithmetic is quantize_rule.h's, element by element as the kernels do it.
template <class T>
void QuantizeBlock(const QuantizeOp& op, size_t b, float* v) {
  const size_t block = op.format.block;
  const size_t begin = b * block, n = std::min(block, op.count - begin);
  const T* src = static_cast<const T*>(op.src) + begin;
  float* residual = op.residual != nullptr ? op.residual + begin : nullptr;
  float absmax = 0;
  for (size_t i = 0; i < n; ++i) {
    v[i] = residual != nullptr ? ToFloat(src[i]) + residual[i] : ToFloat(src[i]);
    const float a = std::fabs(v[i]);
    absmax = (a > absmax || a != a) ? a : absmax;
  }
  const float scale = BlockScale(absmax, op.format);
  QuantScales(op.dst)[b] = scale;
  uint8_t* payload = QuantPayload(op.dst, op.count, op.format);
  for (size_t i = 0; i < n; i += 2) {
    const int q0 = QuantizeValue(v[i], scale, op.format, op.index_base + begin + i);
    const int q1 = i + 1 < n ? QuantizeValue(v[i + 1], scale, op.format,
                                             op.index_base + begin + i + 1)
                             : 0;
    if (residual != nullptr) {
      residual[i] = v[i] - DequantizeValue(q0, scale);
      if (i + 1 < n) residual[i + 1] = v[i + 1] - DequantizeValue(q1, scale);
    }
    if (op.format.bits == 8) {
      payload[begin + i] = static_cast<uint8_t>(static_cast<int8_t>(q0));
      if (i + 1 < n) payload[begin + i + 1] = static_cast<uint8_t>(static_cast<int8_t>(q1));
    } else {
      StoreQuantizedPair(payload, begin + i, q0, q1, 4);
    }
  }
}

// acc[0, n) = the parts' block b read back, added in part order.
template <int kBits>
void SumBlock(const DequantizeOp& op, size_t b, size_t n, float* acc) {
  const size_t stride = op.part_stride != 0 ? op.part_stride : QuantizedBytes(op.count, op.format);
  const size_t begin = b * op.format.block;
  for (int p = 0; p < op.parts; ++p) {
    const char* part = static_cast<const char*>(op.src) + p * stride;
    const float scale = QuantScales(part)[b];
    const uint8_t* payload = QuantPayload(part, op.count, op.format);
    for (size_t i = 0; i < n; ++i) {
      const float x = DequantizeValue(LoadQuantized(payload, begin + i, kBits), scale);
      acc[i] = p == 0 ? x : acc[i] + x;
    }
  }
}

template <class T>
void StoreBlock(const DequantizeOp& op, size_t b, size_t n, const float* acc) {
  T* dst = static_cast<T*>(op.dst) + b * op.format.block;
  for (size_t i = 0; i < n; ++i) dst[i] = FromFloat<T>(acc[i]);
}

template <class Fn>
void ForBlocks(size_t blocks, size_t block, Fn fn) {
  ParallelFor(blocks, [&](size_t first, size_t last) {
    std::vector<float> scratch(block);
    for (size_t b = first; b < last; ++b) fn(b, scratch.data());
  }, ChunkPolicy{.min_chunk = std::max<size_t>(1, 16384 / block), .multiple = 1});
}

}  // namespace

void QuantizeOnHost(const QuantizeOp& op) {
  if (op.count == 0) return;
  const size_t blocks = QuantBlocks(op.count, op.format);
  ForBlocks(blocks, op.format.block, [&](size_t b, float* v) {
    switch (op.dtype) {
      case DType::kBF16: return QuantizeBlock<bf16>(op, b, v);
      case DType::kF16: return QuantizeBlock<f16>(op, b, v);
      default: return QuantizeBlock<float>(op, b, v);
    }
  });
  // The padding to whole words is zeros, so equal chunks are equal bytes.
  const size_t used = 4 * blocks + QuantPayloadBytes(op.count, op.format);
  std::memset(static_cast<char*>(op.dst) + used, 0, QuantizedBytes(op.count, op.format) - used);
}

void DequantizeSumOnHost(const DequantizeOp& op) {
  const size_t block = op.format.block;
  ForBlocks(QuantBlocks(op.count, op.format), block, [&](size_t b, float* acc) {
    const size_t n = std::min(block, op.count - b * block);
    if (op.format.bits == 8) {
      SumBlock<8>(op, b, n, acc);
    } else {
      SumBlock<4>(op, b, n, acc);
    }
    switch (op.dtype) {
      case DType::kBF16: return StoreBlock<bf16>(op, b, n, acc);
      case DType::kF16: return StoreBlock<f16>(op, b, n, acc);
      default: return StoreBlock<float>(op, b, n, acc);
    }
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
