// Built with -mavx2 -mf16c; runs only where IsSupported(CpuIsa::kAvx2).

// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "compute/cpu/map_table.h"

#if defined(__AVX2__) && defined(__F16C__)
#include "compute/cpu/maps_impl.h"
#include "compute/cpu/ops_avx2.h"
#endif

namespace zero::cpu {

const MapTable& Avx2Maps() {
#if defined(__AVX2__) && defined(__F16C__)
  static const MapTable table = MakeMapTable<avx2::Ops>();
  return table;
#else
  return ScalarMaps();  // not an x86 build: MapsFor never selects this level
#endif
}

}  // namespace zero::cpu
