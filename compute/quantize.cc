#include "compute/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_format.h"
#include "compute/cuda/launch.h"
#include "compute/on_device.h"
#include "compute/parallel.h"
#include "compute/quantize_loops.h"

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

using quantize_detail::BlockAbsMax;
using quantize_detail::ByDType;
using quantize_detail::QuantizePairs;
using quantize_detail::StoreElement;
using quantize_detail::PartValue;

// fn(block) over the CPU pool, a few blocks per chunk.
template <class Fn>
void ForBlocks(size_t blocks, size_t block, Fn fn) {
  ParallelFor(blocks, [&](size_t first, size_t last) {
    for (size_t b = first; b < last; ++b) fn(b);
  }, ChunkPolicy{.min_chunk = std::max<size_t>(1, 16384 / block), .multiple = 1});
}

}  // namespace

// The shared loops of quantize_loops.h, a block per iteration on one thread.
void QuantizeOnHost(const QuantizeOp& op) {
  if (op.count == 0) return;
  const size_t block = op.format.block;
  const size_t blocks = QuantBlocks(op.count, op.format);
  ByDType(op.dtype, [&](auto type) {
    using T = decltype(type);
    ForBlocks(blocks, block, [&](size_t b) {
      const size_t begin = b * block, end = std::min(begin + block, op.count);
      const float scale = BlockScale(BlockAbsMax<T>(op, begin, end, 0, 1), op.format);
      QuantScales(op.dst)[b] = scale;
      QuantizePairs<T>(op, scale, begin, end, 0, 1);
    });
  });
  // The padding to whole words is zeros, so equal chunks are equal bytes.
  const size_t used = 4 * blocks + QuantPayloadBytes(op.count, op.format);
  std::memset(static_cast<char*>(op.dst) + used, 0, QuantizedBytes(op.count, op.format) - used);
}

void DequantizeSumOnHost(const DequantizeOp& op) {
  const size_t block = op.format.block;
  // Parts outside, elements inside (SumAt's order per element; the inner
  // loop over one part's block vectorizes).
  auto sum = [&](auto bits, auto type) {
    using T = decltype(type);
    constexpr int kBits = decltype(bits)::value;
    ParallelFor(QuantBlocks(op.count, op.format), [&](size_t first, size_t last) {
      std::vector<float> acc(block);
      for (size_t b = first; b < last; ++b) {
        const size_t begin = b * block, n = std::min(block, op.count - begin);
        for (int p = 0; p < op.parts; ++p) {
          for (size_t i = 0; i < n; ++i) {
            const float x = PartValue<kBits>(op, p, begin + i, b);
            acc[i] = p == 0 ? x : acc[i] + x;
          }
        }
        for (size_t i = 0; i < n; ++i) StoreElement<T>(op.dst, begin + i, acc[i]);
      }
    }, ChunkPolicy{.min_chunk = std::max<size_t>(1, 16384 / block), .multiple = 1});
  };
  ByDType(op.dtype, [&](auto type) {
    if (op.format.bits == 8) {
      sum(std::integral_constant<int, 8>{}, type);
    } else {
      sum(std::integral_constant<int, 4>{}, type);
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
