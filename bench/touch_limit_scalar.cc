// The touch rule at the scalar level (see touch_limit.h).
#include "bench/touch_limit.h"
#include "compute/cpu/ops_scalar.h"
#include "optimizers/cpu/kernels_impl.h"

namespace zero::bench {

const TouchGrid& ScalarTouchGrid() {
  static const TouchGrid* grid = [] {
    auto* g = new TouchGrid;
    cpu::FillGrid<cpu::scalar::Ops, TouchKernel>(g->fns);
    return g;
  }();
  return *grid;
}

}  // namespace zero::bench
