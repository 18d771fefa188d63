// Built with -mavx512f -ffp-contract=off; runs only where
// IsSupported(CpuIsa::kAvx512).

// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "compute/cpu/map_table.h"

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* seeds the
// masked builtins) wherever they inline into our code: a known false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#if defined(__AVX512F__)
#include "compute/cpu/maps_impl.h"
#include "compute/cpu/ops_avx512.h"
#endif

namespace zero::cpu {

const MapTable& Avx512Maps() {
#if defined(__AVX512F__)
  static const MapTable table = MakeMapTable<avx512::Ops>();
  return table;
#else
  return ScalarMaps();  // not an x86 build: MapsFor never selects this level
#endif
}

}  // namespace zero::cpu
