// The loops of quantize_op.h over quantize_rule.h, one block at a time, for
// the CPU (quantize.cc) and the CUDA kernels (cuda/quantize_kernels.cu):
// only the split of the work differs. nvcc-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "base/host_device.h"
#include "compute/quantize_op.h"

namespace zero::quantize_detail {

ZERO_HD inline float LoadElement(const void* p, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kBF16: return ToFloat(static_cast<const bf16*>(p)[i]);
    case DType::kF16: return ToFloat(static_cast<const f16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

ZERO_HD inline void StoreElement(void* p, DType dtype, size_t i, float x) {
  switch (dtype) {
    case DType::kBF16: static_cast<bf16*>(p)[i] = FromFloat<bf16>(x); return;
    case DType::kF16: static_cast<f16*>(p)[i] = FromFloat<f16>(x); return;
    default: static_cast<float*>(p)[i] = x;
  }
}

// The value quantized at element i: src, plus the residual under error feedback.
ZERO_HD inline float Input(const QuantizeOp& op, size_t i) {
  const float x = LoadElement(op.src, op.dtype, i);
  return op.residual != nullptr ? x + op.residual[i] : x;
}

// Elements [begin, end) of one block; `first`, `step` split them among
// threads (CPU: 0, 1).
ZERO_HD inline float BlockAbsMax(const QuantizeOp& op, size_t begin, size_t end, size_t first,
                                 size_t step) {
  float m = 0;
  for (size_t i = begin + first; i < end; i += step) {
    const float a = fabsf(Input(op, i));
    m = (a > m || a != a) ? a : m;  // NaN wins, so it reaches the scale
  }
  return m;
}

// Writes the integers of pairs [begin, end) of one block (begin even) and
// the residuals.
ZERO_HD inline void QuantizePairs(const QuantizeOp& op, float scale, size_t begin, size_t end,
                                  size_t first_pair, size_t pair_step) {
  uint8_t* payload = QuantPayload(op.dst, op.count, op.format);
  for (size_t i = begin + 2 * first_pair; i < end; i += 2 * pair_step) {
    int q[2] = {0, 0};
    for (size_t k = 0; k < 2 && i + k < end; ++k) {
      const float v = Input(op, i + k);
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

// Element i of the sum of the parts, in order, in fp32.
ZERO_HD inline float SumAt(const DequantizeOp& op, size_t i) {
  const size_t chunk =
      op.part_stride != 0 ? op.part_stride : QuantizedBytes(op.count, op.format);
  const size_t block = i / op.format.block;
  float acc = 0;
  for (int p = 0; p < op.parts; ++p) {
    const char* part = static_cast<const char*>(op.src) + p * chunk;
    const float x = DequantizeValue(
        LoadQuantized(QuantPayload(part, op.count, op.format), i, op.format.bits),
        QuantScales(part)[block]);
    acc = p == 0 ? x : acc + x;
  }
  return acc;
}

}  // namespace zero::quantize_detail
