#include "bench/touch_limit.h"

#include "bench/touch_ceiling.h"
#include "compute/cpu/isa.h"
#include "optimizers/cpu/run_grid.h"

namespace zero::bench {

void RunTouchLimit(const StepArgs& args) {
  const TouchGrid* grid = &ScalarTouchGrid();
  switch (cpu::ActiveCpuIsa()) {
    case cpu::CpuIsa::kScalar: break;
    case cpu::CpuIsa::kAvx2: grid = &Avx2TouchGrid(); break;
    case cpu::CpuIsa::kAvx512: grid = &Avx512TouchGrid(); break;
  }
  cpu::RunGrid(grid->fns, TouchScalars{}, args);
}

void RunPlainCeiling(const PlainArrays& a, int threads) {
  SplitOverThreads(a.n, threads, [&a](size_t begin, size_t end) {
    if (a.f32_grads != nullptr) {
      TouchCeilingF32(a.p, a.f32_grads, a.m, a.v, begin, end);
    } else {
      TouchCeilingBF16(a.p, a.bf16_grads, a.m, a.v, a.copy, begin, end);
    }
  });
}

}  // namespace zero::bench
