// Runs one rule's grid of range functions over a whole StepArgs on all
// threads of the pool. Shared by the optimizers (run.cc) and the benchmark's
// bandwidth limit (bench/touch_limit.cc), so both go through the same loop
// and the same thread split.
#pragma once

#include "compute/elementwise.h"
#include "compute/parallel.h"
#include "optimizers/cpu/kernel_table.h"
#include "optimizers/optimizer.h"
#include "optimizers/step_lanes.h"

namespace zero::cpu {

template <class Scalars>
void RunGrid(const RangeGrid<Scalars>& grid, const Scalars& scalars, const StepArgs& args) {
  const RangeFn<Scalars> fn =
      grid[static_cast<int>(args.grad_dtype)][CopySlot(args.param_copy, args.copy_dtype)];
  const RawLanes lanes = LanesOf(args);
  ParallelFor(args.params.size(),
              [&](size_t begin, size_t end) { fn(scalars, lanes, begin, end); });
}

}  // namespace zero::cpu
