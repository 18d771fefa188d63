#include "tests/compute/elementwise_reference.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

constexpr size_t kGuard = 19;  // elements after the span that must stay unchanged

void PutAt(void* data, DType dtype, size_t i, float v) {
  switch (dtype) {
    case DType::kBF16: static_cast<bf16*>(data)[i] = FloatToBF16(v); break;
    case DType::kF16: static_cast<f16*>(data)[i] = FloatToF16(v); break;
    default: static_cast<float*>(data)[i] = v; break;
  }
}

// Values that exercise rounding and overflow in every dtype.
float Special(size_t i) {
  constexpr float kSpecial[] = {
      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(),
      70000.0f,                  // above fp16's largest finite
      65520.0f,                  // rounds to fp16 infinity
      1.0f + 0x1p-8f,            // bf16 tie, rounds to even (down)
      1.0f + 3 * 0x1p-8f,        // bf16 tie, rounds up
      1.0f + 0x1p-11f,           // fp16 tie
      3e-8f,                     // fp16 subnormal
  };
  return kSpecial[i % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
}

// Random values of `dtype`, with a special every 37 elements from `first`.
std::vector<uint8_t> RandomBuffer(size_t elements, DType dtype, uint32_t seed, size_t first) {
  std::vector<float> values = RandomFloats(elements, seed, 4.0f);
  for (size_t i = first; i < elements; i += 37) values[i] = Special(i / 37);
  return Encode(values, dtype);
}

bool HasSource(ElementwiseKind kind) {
  return kind != ElementwiseKind::kFill && kind != ElementwiseKind::kScale;
}

// The dtype of a map's destination and of its source.
DType DstType(ElementwiseKind kind, DType dtype) {
  return kind == ElementwiseKind::kWiden ? DType::kF32 : dtype;
}
DType SrcType(ElementwiseKind kind, DType dtype) {
  return kind == ElementwiseKind::kWiden ? dtype : DType::kF32;
}

}  // namespace

size_t DstSize(ElementwiseKind kind, DType dtype) { return SizeOf(DstType(kind, dtype)); }

size_t SrcSize(ElementwiseKind kind, DType dtype) {
  return HasSource(kind) ? SizeOf(SrcType(kind, dtype)) : 0;
}

void ReferenceMap(ElementwiseKind kind, DType dtype, void* dst, const void* src, float scalar,
                  size_t count) {
  for (size_t i = 0; i < count; ++i) {
    switch (kind) {
      case ElementwiseKind::kWiden:
        static_cast<float*>(dst)[i] = DecodeAt(src, dtype, i);
        break;
      case ElementwiseKind::kNarrow:
        PutAt(dst, dtype, i, static_cast<const float*>(src)[i]);
        break;
      case ElementwiseKind::kAccumulate:
        PutAt(dst, dtype, i, DecodeAt(dst, dtype, i) + static_cast<const float*>(src)[i]);
        break;
      case ElementwiseKind::kFill:
        PutAt(dst, dtype, i, scalar);
        break;
      default:
        PutAt(dst, dtype, i, DecodeAt(dst, dtype, i) * scalar);
        break;
    }
  }
}

double ReferenceSumOfSquares(const void* src, DType dtype, size_t count) {
  double sum = 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = DecodeAt(src, dtype, i);
    sum += v * v;
  }
  return sum;
}

bool ReferenceAnyNonFinite(const void* src, DType dtype, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(DecodeAt(src, dtype, i))) return true;
  }
  return false;
}

MapBuffers::MapBuffers(ElementwiseKind kind, DType dtype, size_t count, size_t offset,
                       uint32_t seed)
    : kind(kind),
      dtype(dtype),
      count(count),
      offset(offset),
      dst(RandomBuffer(offset + count + kGuard, DstType(kind, dtype), seed, 11)) {
  // Specials at other positions than the destination's: never two at once.
  if (HasSource(kind)) {
    src = RandomBuffer(offset + count + kGuard, SrcType(kind, dtype), seed + 1, 5);
  }
}

ElementwiseOp MapBuffers::Op(float value, const float* factor) {
  return {.kind = kind,
          .dtype = dtype,
          .count = count,
          .dst = dst.data() + offset * DstSize(kind, dtype),
          .src = src.empty() ? nullptr : src.data() + offset * SrcSize(kind, dtype),
          .factor = factor,
          .value = value};
}

std::vector<uint8_t> MapBuffers::Expected(float scalar) const {
  std::vector<uint8_t> out = dst;
  ReferenceMap(kind, dtype, out.data() + offset * DstSize(kind, dtype),
               src.empty() ? nullptr : src.data() + offset * SrcSize(kind, dtype), scalar,
               count);
  return out;
}

}  // namespace zero::testing
