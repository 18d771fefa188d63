// Arithmetic policy for the update rules: 8 fp32 lanes with AVX2 + F16C (no
// FMA is enabled, so nothing can fuse). Only for cpu/kernels_avx2.cc, which
// is compiled with -mavx2 -mf16c.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "base/dtype.h"
#include "base/host_device.h"

namespace zero::cpu::avx2 {

struct Ops {
  using V = __m256;
  using M = __m256;  // all-ones or all-zero lanes
  static constexpr size_t kWidth = 8;

  static ZERO_INLINE V Zero() { return _mm256_setzero_ps(); }
  static ZERO_INLINE V Set(float x) { return _mm256_set1_ps(x); }
  static ZERO_INLINE M MaskOf(bool b) { return _mm256_castsi256_ps(_mm256_set1_epi32(b ? -1 : 0)); }

  static ZERO_INLINE V Load(const float* p) { return _mm256_loadu_ps(p); }
  static ZERO_INLINE V Load(const bf16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static ZERO_INLINE V Load(const f16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  static ZERO_INLINE void Store(float* p, V x) { _mm256_storeu_ps(p, x); }
  // FloatToBF16 (dtype.h) on 8 lanes: add the rounding bias, quiet NaNs.
  static ZERO_INLINE void Store(bf16* p, V x) {
    const __m256i b = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, bias), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, quiet, nan);
    // Values fit in 16 bits; packus works per 128-bit lane, so gather qwords 0 and 2.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static ZERO_INLINE void Store(f16* p, V x) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }

  static ZERO_INLINE V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static ZERO_INLINE V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static ZERO_INLINE V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static ZERO_INLINE V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static ZERO_INLINE V Sqrt(V a) { return _mm256_sqrt_ps(a); }
  static ZERO_INLINE V Select(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }
};

}  // namespace zero::cpu::avx2
