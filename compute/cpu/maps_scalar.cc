// Built without -m flags: runs on any CPU.

// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "compute/cpu/maps_impl.h"
#include "compute/cpu/ops_scalar.h"

namespace zero::cpu {

const MapTable& ScalarMaps() {
  static const MapTable table = MakeMapTable<scalar::Ops>();
  return table;
}

}  // namespace zero::cpu
