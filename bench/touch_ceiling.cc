// Built on its own (bench/BUILD: -O3) so nothing here comes from the code
// under test. GCC compiles each function once per target below and picks the
// best one this CPU runs when the program loads (an ifunc), so a binary built
// for the baseline x86-64 still streams with AVX-512 where it can.
#include "bench/touch_ceiling.h"

#include <bit>

namespace zero::bench {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZERO_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZERO_CLONES
#endif

ZERO_CLONES void TouchCeilingF32(float* __restrict p, const float* __restrict g,
                                 float* __restrict m, float* __restrict v, size_t begin,
                                 size_t end) {
  for (size_t i = begin; i < end; ++i) {
    m[i] += g[i];
    v[i] += g[i];
    p[i] += g[i];
  }
}

ZERO_CLONES void TouchCeilingBF16(float* __restrict p, const uint16_t* __restrict g,
                                  float* __restrict m, float* __restrict v,
                                  uint16_t* __restrict copy, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const float grad = std::bit_cast<float>(static_cast<uint32_t>(g[i]) << 16);
    m[i] += grad;
    v[i] += grad;
    const float param = p[i] + grad;
    p[i] = param;
    copy[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(param) >> 16);  // truncation
  }
}

ZERO_CLONES void TouchWiden(uint32_t* __restrict dst, const uint16_t* __restrict src,
                            size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) dst[i] = static_cast<uint32_t>(src[i]) << 16;
}

ZERO_CLONES void TouchNarrow(uint16_t* __restrict dst, const uint32_t* __restrict src,
                             size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) dst[i] = static_cast<uint16_t>(src[i] >> 16);
}

ZERO_CLONES void TouchAccumulate(uint16_t* __restrict dst, const uint32_t* __restrict src,
                                 size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) dst[i] = static_cast<uint16_t>(dst[i] + (src[i] >> 16));
}

ZERO_CLONES uint64_t TouchRead(const uint16_t* __restrict src, size_t begin, size_t end) {
  uint64_t sum = 0;
  for (size_t i = begin; i < end; ++i) sum += src[i];
  return sum;
}

}  // namespace zero::bench
