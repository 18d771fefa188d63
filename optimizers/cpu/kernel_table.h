// The CPU kernels of one SIMD level: for every rule, one function per
// (grad dtype, copy slot) pair, so no dtype test runs inside a hot loop.
// Tables are immutable and built on first use; any thread may read them.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "optimizers/adam_rule.h"
#include "optimizers/elementwise.h"
#include "optimizers/elementwise_op.h"
#include "optimizers/sgd_rule.h"

namespace zero::cpu {

// Updates elements [begin, end) of `lanes`.
template <class Scalars>
using RangeFn = void (*)(const Scalars&, const RawLanes& lanes, size_t begin, size_t end);
template <class Scalars>
using RangeGrid = RangeFn<Scalars>[kNumDTypes][kNumCopySlots];  // [grad dtype][copy slot]

// True when any element of [begin, end) of `data` is an infinity or a NaN.
using NonFiniteFn = bool (*)(const void* data, size_t begin, size_t end);

// Applies a map (elementwise_rules.h) to elements [begin, end) of `op`;
// `scalar` is ScalarOf(op), read once by the caller.
using MapFn = void (*)(const ElementwiseOp& op, float scalar, size_t begin, size_t end);

struct KernelTable {
  RangeGrid<AdamScalars> adam[kNumAdamVariants];  // by AdamVariant() (adam_rule.h)
  RangeGrid<SgdScalars> sgd_plain;
  RangeGrid<SgdScalars> sgd_momentum;
  NonFiniteFn any_nonfinite[kNumDTypes];
  MapFn map[kNumMapKinds][kNumDTypes];  // [ElementwiseKind][dtype]
};

// One per translation unit (kernels_<level>.cc). Call only the levels that
// IsSupported() says this CPU runs (cpu/isa.h).
const KernelTable& ScalarKernels();
const KernelTable& Avx2Kernels();
const KernelTable& Avx512Kernels();

}  // namespace zero::cpu
