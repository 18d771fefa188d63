// Plain loops with the memory traffic of AdamW and of the element-wise
// operations, and trivial arithmetic, written without the optimizers' code
// (no SIMD policy, no range loop, no pool) and vectorized by the compiler
// (see touch_ceiling.cc); and the thread split they run under. Each call
// updates elements [begin, end).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

namespace zero::bench {

// Reads p, g, m, v; writes p, m, v: 28 bytes per element.
void TouchCeilingF32(float* p, const float* g, float* m, float* v, size_t begin, size_t end);
// Reads p, bf16 g, m, v; writes p, m, v and a bf16 copy of p: 28 bytes.
void TouchCeilingBF16(float* p, const uint16_t* g, float* m, float* v, uint16_t* copy,
                      size_t begin, size_t end);

// Widen's traffic: read 2 bytes, write 4 (bf16 bits shifted up).
void TouchWiden(uint32_t* dst, const uint16_t* src, size_t begin, size_t end);
// Narrow's: read 4, write 2 (truncated).
void TouchNarrow(uint16_t* dst, const uint32_t* src, size_t begin, size_t end);
// AccumulateNarrow's: read 2 and 4, write 2.
void TouchAccumulate(uint16_t* dst, const uint32_t* src, size_t begin, size_t end);
// A sum of squares' traffic: read 2; returns an integer sum so it is not dropped.
uint64_t TouchRead(const uint16_t* src, size_t begin, size_t end);

// Calls fn(begin, end) on `threads` contiguous slices covering [0, n), each
// starting on a multiple of 16 elements; the caller runs the first slice,
// a std::thread each of the others.
template <class Fn>
void SplitOverThreads(size_t n, int threads, const Fn& fn) {
  const size_t parts = static_cast<size_t>(std::max(threads, 1));
  const size_t slice = ((n + parts - 1) / parts + 15) / 16 * 16;
  auto run = [&](size_t t) {
    const size_t begin = std::min(n, t * slice);
    fn(begin, std::min(n, begin + slice));
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < parts; ++t) workers.emplace_back(run, t);
  run(0);
  for (std::thread& w : workers) w.join();
}

}  // namespace zero::bench
