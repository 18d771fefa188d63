// Included first by every file compiled at one SIMD level's -m flags
// (compute/cpu/maps_<level>.cc, optimizers/cpu/kernels_<level>.cc): the
// pragmas below then apply to all the code such a file instantiates.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#pragma GCC optimize("fp-contract=off")
#if defined(__AVX512F__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* seeds the
// masked builtins) wherever they inline into our code: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif
