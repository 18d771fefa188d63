#include "optimizers/cpu/run.h"

#include <atomic>

#include "optimizers/cpu/isa.h"
#include "optimizers/cpu/kernel_table.h"
#include "optimizers/cpu/run_grid.h"
#include "optimizers/elementwise.h"
#include "optimizers/parallel.h"
#include "optimizers/step_lanes.h"

namespace zero::cpu {

void RunAdam(const AdamScalars& scalars, const StepArgs& args) {
  RunGrid(ActiveKernels().adam[AdamVariant(scalars)], scalars, args);
}

void RunSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args) {
  const KernelTable& t = ActiveKernels();
  RunGrid(momentum ? t.sgd_momentum : t.sgd_plain, scalars, args);
}

bool AnyNonFinite(const void* data, DType dtype, size_t count) {
  const NonFiniteFn fn = ActiveKernels().any_nonfinite[static_cast<int>(dtype)];
  std::atomic<bool> found{false};
  ParallelFor(count, [&](size_t begin, size_t end) {
    if (!found.load(std::memory_order_relaxed) && fn(data, begin, end)) {
      found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
}

}  // namespace zero::cpu
