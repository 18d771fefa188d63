// Arithmetic policy for the update rules: 16 fp32 lanes with AVX-512F. The
// ISA has FMA, so its translation unit must be built with -ffp-contract=off.
// Only for cpu/kernels_avx512.cc, which is compiled with -mavx512f.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "base/dtype.h"
#include "base/host_device.h"

namespace zero::cpu::avx512 {

struct Ops {
  using V = __m512;
  using M = __mmask16;
  static constexpr size_t kWidth = 16;

  static ZERO_INLINE V Zero() { return _mm512_setzero_ps(); }
  static ZERO_INLINE V Set(float x) { return _mm512_set1_ps(x); }
  static ZERO_INLINE M MaskOf(bool b) { return b ? 0xFFFF : 0; }

  static ZERO_INLINE V Load(const float* p) { return _mm512_loadu_ps(p); }
  static ZERO_INLINE V Load(const bf16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static ZERO_INLINE V Load(const f16* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }

  static ZERO_INLINE void Store(float* p, V x) { _mm512_storeu_ps(p, x); }
  // FloatToBF16 (dtype.h) on 16 lanes. Not vcvtneps2bf16: it flushes
  // subnormal inputs to zero, which the scalar path does not.
  static ZERO_INLINE void Store(bf16* p, V x) {
    const __m512i b = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, bias), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  static ZERO_INLINE void Store(f16* p, V x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }

  static ZERO_INLINE V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static ZERO_INLINE V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static ZERO_INLINE V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static ZERO_INLINE V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static ZERO_INLINE V Sqrt(V a) { return _mm512_sqrt_ps(a); }
  static ZERO_INLINE V Select(M m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); }
};

}  // namespace zero::cpu::avx512
