// Built with -mavx512f -ffp-contract=off; runs only where
// IsSupported(CpuIsa::kAvx512).

#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

#include "compute/cpu/map_table.h"

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
