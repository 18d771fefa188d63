// Built without -m flags: runs on any CPU.

#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

#include "compute/cpu/maps_impl.h"
#include "compute/cpu/ops_scalar.h"

namespace zero::cpu {

const MapTable& ScalarMaps() {
  static const MapTable table = MakeMapTable<scalar::Ops>();
  return table;
}

}  // namespace zero::cpu
