// Bit-identical results across SIMD levels need every mul and add rounded on
// its own. BUILD passes -ffp-contract=off; this keeps it so for any build.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "compute/cpu/ops_scalar.h"
#include "optimizers/cpu/kernels_impl.h"

namespace zero::cpu {

const KernelTable& ScalarKernels() {
  static const KernelTable table = MakeKernelTable<scalar::Ops>();
  return table;
}

}  // namespace zero::cpu
