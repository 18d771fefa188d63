// The loops of quantize_op.h over quantize_rule.h, one block at a time, for
// the CPU (quantize.cc) and the CUDA kernels (cuda/quantize_kernels.cu):
// only the split of the work differs, so both give the same bytes and sums.
// Templated on the element type and the width, so neither side branches per
// element. nvcc-compatible.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "base/host_device.h"
#include "compute/quantize_op.h"

namespace zero::quantize_detail {

// fn(T{}) for the element type of `dtype` (host side: picks the template).
template <class Fn>
decltype(auto) ByDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBF16: return fn(bf16{});
    case DType::kF16: return fn(f16{});
    default: return fn(float{});
  }
}

// The value quantized at element i: src, plus the residual under error feedback.
template <class T>
ZERO_HD inline float Input(const QuantizeOp& op, size_t i) {
  const float x = ToFloat(static_cast<const T*>(op.src)[i]);
  return op.residual != nullptr ? x + op.residual[i] : x;
}

// Elements [begin, end) of one block; `first`, `step` split them among
// threads (CPU: 0, 1).
template <class T>
ZERO_HD inline float BlockAbsMax(const QuantizeOp& op, size_t begin, size_t end, size_t first,
                                 size_t step) {
  float m = 0;
  for (size_t i = begin + first; i < end; i += step) {
    const float a = fabsf(Input<T>(op, i));
    m = (a > m || a != a) ? a : m;  // NaN wins, so it reaches the scale
  }
  return m;
}

// Writes the integers of pairs [begin, end) of one block (begin even) and
// the residuals.
template <class T>
ZERO_HD inline void QuantizePairs(const QuantizeOp& op, float scale, size_t begin, size_t end,
                                  size_t first_pair, size_t pair_step) {
  uint8_t* payload = QuantPayload(op.dst, op.count, op.format);
  for (size_t i = begin + 2 * first_pair; i < end; i += 2 * pair_step) {
    int q[2] = {0, 0};
    for (size_t k = 0; k < 2 && i + k < end; ++k) {
      const float v = Input<T>(op, i + k);
      q[k] = QuantizeValue(v, scale, op.format, op.index_base + i + k);
      if (op.residual != nullptr) op.residual[i + k] = v - DequantizeValue(q[k], scale);
    }
    if (op.format.bits == 8) {
      StoreQuantizedPair(payload, i, q[0], 0, 8);
      if (i + 1 < end) StoreQuantizedPair(payload, i + 1, q[1], 0, 8);
    } else {
      StoreQuantizedPair(payload, i, q[0], q[1], 4);
    }
  }
}

// Element i (of quantization block `block`) of part p, read back.
template <int kBits>
ZERO_HD inline float PartValue(const DequantizeOp& op, int p, size_t i, size_t block) {
  const size_t chunk =
      op.part_stride != 0 ? op.part_stride : QuantizedBytes(op.count, op.format);
  const char* part = static_cast<const char*>(op.src) + p * chunk;
  return DequantizeValue(LoadQuantized(QuantPayload(part, op.count, op.format), i, kBits),
                         QuantScales(part)[block]);
}

// Element i of the sum of the parts, in order, in fp32 (a caller looping
// over parts outside adds the same values in the same order).
template <int kBits>
ZERO_HD inline float SumAt(const DequantizeOp& op, size_t i, size_t block) {
  float acc = 0;
  for (int p = 0; p < op.parts; ++p) {
    const float x = PartValue<kBits>(op, p, i, block);
    acc = p == 0 ? x : acc + x;
  }
  return acc;
}

template <class T>
ZERO_HD inline void StoreElement(void* p, size_t i, float x) {
  static_cast<T*>(p)[i] = FromFloat<T>(x);
}

}  // namespace zero::quantize_detail
