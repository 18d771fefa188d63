#include "optimizers/cpu/run.h"

#include "compute/elementwise.h"
#include "compute/parallel.h"
#include "optimizers/cpu/kernel_table.h"
#include "optimizers/cpu/run_grid.h"
#include "optimizers/step_lanes.h"

namespace zero::cpu {

const KernelTable& KernelsFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return Avx512Kernels();
    case CpuIsa::kAvx2:
      return Avx2Kernels();
    default:
      return ScalarKernels();
  }
}

const KernelTable& ActiveKernels() { return KernelsFor(ActiveCpuIsa()); }

void RunAdam(const AdamScalars& scalars, const StepArgs& args) {
  RunGrid(ActiveKernels().adam[AdamVariant(scalars)], scalars, args);
}

void RunSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args) {
  const KernelTable& t = ActiveKernels();
  RunGrid(momentum ? t.sgd_momentum : t.sgd_plain, scalars, args);
}

}  // namespace zero::cpu
