#include "base/dtype.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace zero {
namespace {

uint16_t ToBF16Bits(uint32_t float_bits) { return FloatToBF16(BitsFloat(float_bits)).bits; }
uint16_t ToF16Bits(uint32_t float_bits) { return FloatToF16(BitsFloat(float_bits)).bits; }
uint32_t FromF16Bits(uint16_t h) { return FloatBits(F16ToFloat(f16{h})); }

bool IsF16Nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }

TEST(DTypeTest, SizesNamesValidity) {
  EXPECT_EQ(SizeOf(DType::kF32), 4u);
  EXPECT_EQ(SizeOf(DType::kBF16), 2u);
  EXPECT_EQ(SizeOf(DType::kF16), 2u);
  EXPECT_EQ(Name(DType::kF32), "f32");
  EXPECT_EQ(Name(DType::kBF16), "bf16");
  EXPECT_EQ(Name(DType::kF16), "f16");
  EXPECT_TRUE(IsValid(DType::kF16));
  EXPECT_FALSE(IsValid(static_cast<DType>(3)));
  EXPECT_EQ(Name(static_cast<DType>(3)), "invalid");
  EXPECT_EQ(DTypeOf<bf16>::value, DType::kBF16);
}

TEST(BF16Test, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float f = BF16ToFloat(bf16{bits});
    EXPECT_EQ(FloatBits(f), b << 16);
    const bool nan = (bits & 0x7F80) == 0x7F80 && (bits & 0x7F) != 0;
    // A NaN comes back quiet with its sign and payload; everything else exactly.
    ASSERT_EQ(FloatToBF16(f).bits, nan ? (bits | 0x40) : bits) << std::hex << b;
  }
}

TEST(BF16Test, RoundsToNearestEven) {
  EXPECT_EQ(ToBF16Bits(0x3F808000), 0x3F80);  // tie, even below
  EXPECT_EQ(ToBF16Bits(0x3F818000), 0x3F82);  // tie, even above
  EXPECT_EQ(ToBF16Bits(0x3F808001), 0x3F81);
  EXPECT_EQ(ToBF16Bits(0x3F807FFF), 0x3F80);
  EXPECT_EQ(ToBF16Bits(0xBF818000), 0xBF82);  // sign does not matter
  EXPECT_EQ(ToBF16Bits(0x00008000), 0x0000);  // subnormal tie to zero
  EXPECT_EQ(ToBF16Bits(0x00018000), 0x0002);
  EXPECT_EQ(ToBF16Bits(0x7F7FFFFF), 0x7F80);  // max float rounds up to inf
  EXPECT_EQ(ToBF16Bits(0x7F7F7FFF), 0x7F7F);
  EXPECT_EQ(ToBF16Bits(0xFF800000), 0xFF80);  // -inf
  EXPECT_EQ(ToBF16Bits(0x7FA00001), 0x7FE0);  // signaling NaN: quiet, payload kept
  EXPECT_EQ(ToBF16Bits(0xFFFFFFFF), 0xFFFF);
  EXPECT_EQ(ToBF16Bits(0x7F800001), 0x7FC0);  // payload below bit 16 still a NaN
}

// Nearest bf16 by comparing the two candidates in double; ties to even.
uint16_t NearestBF16(float x) {
  const uint32_t u = FloatBits(x);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dlo = std::fabs(static_cast<double>(BF16ToFloat(bf16{lo})) - x);
  const double dhi = std::fabs(static_cast<double>(BF16ToFloat(bf16{hi})) - x);
  if (dlo != dhi) return dlo < dhi ? lo : hi;
  return (lo & 1) ? hi : lo;
}

TEST(BF16Test, MatchesNearestOverSampledFloats) {
  for (uint64_t u = 0; u < 0x7F7F0000ull; u += 4093) {  // finite, below the overflow edge
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float x = BitsFloat(static_cast<uint32_t>(u) | sign);
      ASSERT_EQ(FloatToBF16(x).bits, NearestBF16(x)) << std::hex << (u | sign);
    }
  }
}

// Independent decoding of a finite binary16 value.
double DecodeF16(uint16_t h) {
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

TEST(F16Test, EveryPatternDecodesExactly) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = F16ToFloat(f16{h});
    if ((h & 0x7C00) != 0x7C00) {
      ASSERT_EQ(static_cast<double>(f), DecodeF16(h)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0);
    } else if (IsF16Nan(h)) {
      ASSERT_TRUE(std::isnan(f));
    } else {
      ASSERT_TRUE(std::isinf(f));
    }
  }
}

TEST(F16Test, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const uint16_t back = FloatToF16(F16ToFloat(f16{h})).bits;
    ASSERT_EQ(back, IsF16Nan(h) ? (h | 0x200) : h) << std::hex << b;
  }
}

TEST(F16Test, RoundsToNearestEvenAtTheEdges) {
  EXPECT_EQ(ToF16Bits(FloatBits(65504.0f)), 0x7BFF);  // max half
  EXPECT_EQ(ToF16Bits(FloatBits(65519.996f)), 0x7BFF);
  EXPECT_EQ(ToF16Bits(FloatBits(65520.0f)), 0x7C00);  // tie with "65536" rounds to inf
  EXPECT_EQ(ToF16Bits(FloatBits(-1e10f)), 0xFC00);
  EXPECT_EQ(ToF16Bits(FloatBits(0x1p-24f)), 0x0001);  // smallest subnormal
  EXPECT_EQ(ToF16Bits(FloatBits(0x1p-25f)), 0x0000);  // tie to even (zero)
  EXPECT_EQ(ToF16Bits(FloatBits(-0x1p-25f)), 0x8000);
  EXPECT_EQ(ToF16Bits(FloatBits(0x1.000002p-25f)), 0x0001);
  EXPECT_EQ(ToF16Bits(FloatBits(0x3p-25f)), 0x0002);      // 1.5 units: tie to even (2)
  EXPECT_EQ(ToF16Bits(FloatBits(0x5p-25f)), 0x0002);      // 2.5 units: tie to even (2)
  EXPECT_EQ(ToF16Bits(FloatBits(0x1.ff8p-15f)), 0x03FF);  // largest subnormal
  EXPECT_EQ(ToF16Bits(FloatBits(0x1.ffcp-15f)), 0x0400);  // tie: rounds up into the normals
  EXPECT_EQ(ToF16Bits(FloatBits(0x1.ffbp-15f)), 0x03FF);
  EXPECT_EQ(ToF16Bits(FloatBits(1.0f + 0x1p-11f)), 0x3C00);  // tie, even below
  EXPECT_EQ(ToF16Bits(FloatBits(1.0f + 0x3p-11f)), 0x3C02);  // tie, even above
  EXPECT_EQ(ToF16Bits(0x7F800000), 0x7C00);
  EXPECT_EQ(ToF16Bits(0x7F800001), 0x7E00);  // NaN stays NaN, quiet
  EXPECT_EQ(ToF16Bits(0xFFA00000), 0xFF00);
  EXPECT_EQ(FromF16Bits(0x7C01), 0x7FC02000u);  // half sNaN loads quiet, as F16C does
}

// Nearest finite half by search over the (monotonic) positive patterns.
uint16_t NearestF16(float x) {
  const double ax = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (ax >= 65520.0) return sign | 0x7C00;
  uint16_t lo = 0, hi = 0x7BFF;
  while (hi - lo > 1) {  // invariant: DecodeF16(lo) <= ax < DecodeF16(hi) or ax at the top
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (DecodeF16(mid) <= ax ? lo : hi) = mid;
  }
  if (DecodeF16(hi) <= ax) lo = hi;
  const double dlo = ax - DecodeF16(lo);
  const double dhi = lo == 0x7BFF ? 1e300 : DecodeF16(static_cast<uint16_t>(lo + 1)) - ax;
  uint16_t r = lo;
  if (dhi < dlo || (dhi == dlo && (lo & 1))) r = static_cast<uint16_t>(lo + 1);
  return sign | r;
}

TEST(F16Test, MatchesNearestOverSampledFloats) {
  for (uint64_t u = 0; u < 0x7F800000ull; u += 8191) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float x = BitsFloat(static_cast<uint32_t>(u) | sign);
      ASSERT_EQ(FloatToF16(x).bits, NearestF16(x)) << std::hex << (u | sign);
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareToF16(float x) {
  return static_cast<uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float HardwareFromF16(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))));
}

// The SIMD paths convert with F16C; the scalar path must agree bit for bit,
// NaNs included.
TEST(F16Test, AgreesWithF16cHardware) {
  unsigned eax, ebx, ecx, edx;
  if (!__builtin_cpu_supports("avx") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx) ||
      !(ecx & (1u << 29))) {
    GTEST_SKIP() << "no F16C";
  }
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    ASSERT_EQ(FromF16Bits(h), FloatBits(HardwareFromF16(h))) << std::hex << b;
  }
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 7919) {
    const float x = BitsFloat(static_cast<uint32_t>(u));
    ASSERT_EQ(FloatToF16(x).bits, HardwareToF16(x)) << std::hex << u;
  }
  for (uint32_t u = 0x7F800000; u < 0x7F900000; ++u) {  // NaN payloads
    ASSERT_EQ(ToF16Bits(u), HardwareToF16(BitsFloat(u))) << std::hex << u;
  }
}
#endif

}  // namespace
}  // namespace zero
