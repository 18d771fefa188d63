// A plain loop with AdamW's memory traffic and trivial arithmetic, written
// without the optimizers' code (no SIMD policy, no range loop, no pool) and
// vectorized by the compiler (see touch_ceiling.cc). Each call updates
// elements [begin, end).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zero::bench {

// Reads p, g, m, v; writes p, m, v: 28 bytes per element.
void TouchCeilingF32(float* p, const float* g, float* m, float* v, size_t begin, size_t end);
// Reads p, bf16 g, m, v; writes p, m, v and a bf16 copy of p: 28 bytes.
void TouchCeilingBF16(float* p, const uint16_t* g, float* m, float* v, uint16_t* copy,
                      size_t begin, size_t end);

}  // namespace zero::bench
