// The two ceilings optimizer_bench measures AdamW against, on the same arrays:
//  - RunTouchLimit: touch_rule.h through the optimizers' own range loop, SIMD
//    level (the active one, cpu/isa.h) and thread pool; only the arithmetic
//    differs from AdamW's.
//  - RunPlainCeiling: a plain loop the compiler vectorizes (touch_ceiling.cc,
//    its own library and flags), split over std::threads of its own, so the
//    ratio is also taken against something outside the code under test.
// Both read p, g, m, v and write p, m, v (and the bf16 copy when asked): 28
// bytes per element, as AdamW.
#pragma once

#include <cstddef>

#include "bench/touch_rule.h"
#include "optimizers/cpu/kernel_table.h"
#include "optimizers/optimizer.h"

namespace zero::bench {

// One level's range functions for the touch rule, by grad dtype and copy slot.
struct TouchGrid {
  cpu::RangeGrid<TouchScalars> fns;
};
// Defined in touch_limit_<level>.cc, each built with that level's -m flags.
const TouchGrid& ScalarTouchGrid();
const TouchGrid& Avx2TouchGrid();
const TouchGrid& Avx512TouchGrid();

// args.state holds two buffers (m, v), as AdamW's.
void RunTouchLimit(const StepArgs& args);

// The plain ceiling over the same arrays: fp32 grads (f32_grads), or bf16
// grads and a bf16 copy of the parameters written (bf16_grads and copy).
struct PlainArrays {
  float* p;
  float* m;
  float* v;
  const float* f32_grads = nullptr;
  const uint16_t* bf16_grads = nullptr;
  uint16_t* copy = nullptr;
  size_t n = 0;
};
void RunPlainCeiling(const PlainArrays& a, int threads);

}  // namespace zero::bench
