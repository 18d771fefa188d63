#include "compute/cpu/level_file.h"  // first: its pragmas cover the whole file

#include "compute/cpu/ops_scalar.h"
#include "optimizers/cpu/kernels_impl.h"

namespace zero::cpu {

const KernelTable& ScalarKernels() {
  static const KernelTable table = MakeKernelTable<scalar::Ops>();
  return table;
}

}  // namespace zero::cpu
