// Built with -mavx2 -mf16c; runs only where IsSupported(CpuIsa::kAvx2).

#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

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
