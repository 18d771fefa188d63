// The touch rule at the AVX2 level (see touch_limit.h). Built with -mavx2
// -mf16c; called only where the optimizers run at that level.
#include "bench/touch_limit.h"

#if defined(__AVX2__) && defined(__F16C__)
#include "compute/cpu/ops_avx2.h"
#include "optimizers/cpu/kernels_impl.h"
#endif

namespace zero::bench {

const TouchGrid& Avx2TouchGrid() {
#if defined(__AVX2__) && defined(__F16C__)
  static const TouchGrid* grid = [] {
    auto* g = new TouchGrid;
    cpu::FillGrid<cpu::avx2::Ops, TouchKernel>(g->fns);
    return g;
  }();
  return *grid;
#else
  return ScalarTouchGrid();  // not an x86 build: isa.cc never selects this level
#endif
}

}  // namespace zero::bench
