// The CPU functions of the element-wise operations at one SIMD level: a map
// function per (kind, dtype) and the inf/NaN scan per dtype, so no dtype
// test runs inside a hot loop. Tables are immutable and built on first use;
// any thread may read them. The optimizers' update rules have a table of
// their own (optimizers/cpu/kernel_table.h), built the same way.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "compute/cpu/isa.h"
#include "compute/elementwise_op.h"

namespace zero::cpu {

// True when any element of [begin, end) of `data` is an infinity or a NaN.
using NonFiniteFn = bool (*)(const void* data, size_t begin, size_t end);

// Applies a map (elementwise_rules.h) to elements [begin, end) of `op`;
// `scalar` is ScalarOf(op), read once by the caller.
using MapFn = void (*)(const ElementwiseOp& op, float scalar, size_t begin, size_t end);

struct MapTable {
  NonFiniteFn any_nonfinite[kNumDTypes];
  MapFn map[kNumMapKinds][kNumDTypes];  // [ElementwiseKind][dtype]
};

// One per translation unit (maps_<level>.cc). Call only the levels that
// IsSupported() says this CPU runs.
const MapTable& ScalarMaps();
const MapTable& Avx2Maps();
const MapTable& Avx512Maps();

const MapTable& MapsFor(CpuIsa isa);  // requires IsSupported(isa)
const MapTable& ActiveMaps();

}  // namespace zero::cpu
