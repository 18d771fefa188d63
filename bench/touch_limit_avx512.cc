// The touch rule at the AVX-512 level (see touch_limit.h). Built with
// -mavx512f; called only where the optimizers run at that level.
#include "bench/touch_limit.h"

// GCC 12 warns inside its own AVX-512 headers wherever they inline into our
// code (as in optimizers/cpu/kernels_avx512.cc): a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#if defined(__AVX512F__)
#include "compute/cpu/ops_avx512.h"
#include "optimizers/cpu/kernels_impl.h"
#endif

namespace zero::bench {

const TouchGrid& Avx512TouchGrid() {
#if defined(__AVX512F__)
  static const TouchGrid* grid = [] {
    auto* g = new TouchGrid;
    cpu::FillGrid<cpu::avx512::Ops, TouchKernel>(g->fns);
    return g;
  }();
  return *grid;
#else
  return ScalarTouchGrid();  // not an x86 build: isa.cc never selects this level
#endif
}

}  // namespace zero::bench
