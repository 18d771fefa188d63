// Portability macros for code compiled by both the host compiler and nvcc.
// Dependency-free, so dtype.h and the update rules can include it anywhere.
#pragma once

#if defined(__CUDACC__)
#define ZERO_HD __host__ __device__
#else
#define ZERO_HD
#endif

// Hot-loop helpers must inline: an out-of-line copy compiled for one SIMD
// level could be picked by the linker for another (see cpu/kernels_impl.h).
#define ZERO_INLINE inline __attribute__((always_inline))
