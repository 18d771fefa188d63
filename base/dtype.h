// Element types of gradients and parameter copies, and exact conversions
// between them and fp32. Header-only, dependency-free, and usable in CUDA
// device code: CPU and GPU paths convert with the same functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/host_device.h"

namespace zero {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };
inline constexpr int kNumDTypes = 3;

// False for values outside the enum (e.g. read from a corrupt file).
constexpr bool IsValid(DType t) { return static_cast<unsigned>(t) < kNumDTypes; }

constexpr size_t SizeOf(DType t) { return t == DType::kF32 ? 4 : 2; }

constexpr std::string_view Name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "invalid";
}

// Storage-only 16-bit types: arithmetic always happens in fp32.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<bf16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<f16> {
  static constexpr DType value = DType::kF16;
};

ZERO_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

ZERO_HD inline float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Exact: bf16 is the top half of an fp32.
ZERO_HD inline float BF16ToFloat(bf16 x) { return BitsFloat(uint32_t{x.bits} << 16); }

// Round to nearest, ties to even. NaN keeps its sign and top payload bits and
// becomes quiet, so a NaN never rounds into an infinity.
ZERO_HD inline bf16 FloatToBF16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};
  const uint32_t lsb = (u >> 16) & 1u;
  return {static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16)};
}

// Exact. NaN payloads are kept and made quiet, as x86 F16C (vcvtph2ps) does,
// so the scalar and SIMD paths agree bit for bit.
ZERO_HD inline float F16ToFloat(f16 h) {
  const uint32_t sign = uint32_t{h.bits & 0x8000u} << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1Fu;
  const uint32_t mant = h.bits & 0x3FFu;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp != 0) return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in fp32 (and normal there).
  const float v = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -v : v;
}

// IEEE binary16, round to nearest, ties to even; overflow gives infinity,
// tiny values give subnormals or signed zero. NaN handling matches F16C
// (vcvtps2ph): quiet, sign and top payload bits kept.
ZERO_HD inline f16 FloatToF16(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return {static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu))};
  if (a >= 0x477FF000u) return {static_cast<uint16_t>(sign | 0x7C00u)};  // >= 65520
  if (a >= 0x38800000u) {  // >= 2^-14: normal half; rebias the exponent by 127 - 15
    const uint32_t v = a - (112u << 23);
    const uint32_t lsb = (v >> 13) & 1u;
    return {static_cast<uint16_t>(sign | ((v + 0xFFFu + lsb) >> 13))};
  }
  if (a < 0x33000000u) return {static_cast<uint16_t>(sign)};  // below 2^-25 rounds to zero
  // Subnormal half: count units of 2^-24. a = mant * 2^(exp - 150).
  const uint32_t exp = a >> 23;
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // 14..24
  uint32_t units = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (units & 1u))) ++units;
  return {static_cast<uint16_t>(sign | units)};
}

// Uniform element access for templates over the element type.
ZERO_HD inline float ToFloat(float x) { return x; }
ZERO_HD inline float ToFloat(bf16 x) { return BF16ToFloat(x); }
ZERO_HD inline float ToFloat(f16 x) { return F16ToFloat(x); }

template <class T>
ZERO_HD inline T FromFloat(float x);
template <>
ZERO_HD inline float FromFloat<float>(float x) {
  return x;
}
template <>
ZERO_HD inline bf16 FromFloat<bf16>(float x) {
  return FloatToBF16(x);
}
template <>
ZERO_HD inline f16 FromFloat<f16>(float x) {
  return FloatToF16(x);
}

}  // namespace zero
