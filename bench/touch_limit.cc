#include "bench/touch_limit.h"

#include <thread>
#include <vector>

#include "bench/touch_ceiling.h"
#include "optimizers/cpu/isa.h"
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

// Contiguous equal slices, one per thread (the caller takes the first), each
// starting on a 64-byte boundary of the fp32 arrays.
void RunPlainCeiling(const PlainArrays& a, int threads) {
  if (threads < 1) threads = 1;
  const size_t slice = (a.n / threads + 15) / 16 * 16;
  auto run = [&a, slice](int t) {
    const size_t begin = std::min(a.n, t * slice);
    const size_t end = std::min(a.n, begin + slice);
    if (a.f32_grads != nullptr) {
      TouchCeilingF32(a.p, a.f32_grads, a.m, a.v, begin, end);
    } else {
      TouchCeilingBF16(a.p, a.bf16_grads, a.m, a.v, a.copy, begin, end);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(run, t);
  run(0);
  for (std::thread& w : workers) w.join();
}

}  // namespace zero::bench
