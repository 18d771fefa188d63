// The CPU kernels of one SIMD level: for every rule, one function per
// (grad dtype, copy slot) pair, so no dtype test runs inside a hot loop.
// Tables are immutable and built on first use; any thread may read them.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "compute/cpu/isa.h"
#include "compute/elementwise.h"
#include "optimizers/adam_rule.h"
#include "optimizers/sgd_rule.h"

namespace zero::cpu {

// Updates elements [begin, end) of `lanes`.
template <class Scalars>
using RangeFn = void (*)(const Scalars&, const RawLanes& lanes, size_t begin, size_t end);
template <class Scalars>
using RangeGrid = RangeFn<Scalars>[kNumDTypes][kNumCopySlots];  // [grad dtype][copy slot]

struct KernelTable {
  RangeGrid<AdamScalars> adam[kNumAdamVariants];  // by AdamVariant() (adam_rule.h)
  RangeGrid<SgdScalars> sgd_plain;
  RangeGrid<SgdScalars> sgd_momentum;
};

// One per translation unit (kernels_<level>.cc). Call only the levels that
// IsSupported() says this CPU runs (cpu/isa.h).
const KernelTable& ScalarKernels();
const KernelTable& Avx2Kernels();
const KernelTable& Avx512Kernels();

const KernelTable& KernelsFor(CpuIsa isa);  // requires IsSupported(isa)
const KernelTable& ActiveKernels();

}  // namespace zero::cpu
