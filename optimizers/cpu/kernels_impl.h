// Builds a KernelTable for one arithmetic policy `Ops`. Included only by
// files compiled with one level's -m flags: the kernels_<level>.cc files, and
// bench/touch_limit_<level>.cc, which fill a grid for the benchmark's rule.
//
// Why everything here is a template over Ops or always inlined: an inline
// function that two such files both emit out of line becomes one weak symbol,
// and the linker may keep the AVX-512 copy for every caller, which then dies
// on a CPU without AVX-512. Templates over Ops get distinct symbols per level.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "compute/elementwise.h"
#include "optimizers/cpu/kernel_table.h"

namespace zero::cpu {

// The last partial vector: staged through zero-padded buffers so the same
// vector code (and so the same rounding) handles every element.
template <class Ops, class Kernel, class G, class C>
void ApplyTail(const Kernel& kernel, const Lanes<G, C>& io, size_t i, size_t count) {
  constexpr size_t kW = Ops::kWidth;
  float p[kW] = {}, s0[kW] = {}, s1[kW] = {};
  G g[kW] = {};
  C copy[kW] = {};
  std::memcpy(p, io.p + i, count * sizeof(float));
  std::memcpy(g, io.g + i, count * sizeof(G));
  if constexpr (Kernel::kStates >= 1) std::memcpy(s0, io.s0 + i, count * sizeof(float));
  if constexpr (Kernel::kStates >= 2) std::memcpy(s1, io.s1 + i, count * sizeof(float));
  ApplyAt<Ops>(kernel, Lanes<G, C>{p, g, s0, s1, copy}, 0);
  std::memcpy(io.p + i, p, count * sizeof(float));
  if constexpr (Kernel::kStates >= 1) std::memcpy(io.s0 + i, s0, count * sizeof(float));
  if constexpr (Kernel::kStates >= 2) std::memcpy(io.s1 + i, s1, count * sizeof(float));
  if constexpr (!std::is_same_v<C, NoCopy>) std::memcpy(io.copy + i, copy, count * sizeof(C));
}

// Software prefetch a little ahead of all streams: with four to five streams
// per loop the hardware prefetchers alone leave bandwidth unused.
template <class Ops, class Kernel, class G, class C>
ZERO_INLINE void PrefetchAt(const Lanes<G, C>& io, size_t i) {
  __builtin_prefetch(io.p + i, 1);
  __builtin_prefetch(io.g + i, 0);
  if constexpr (Kernel::kStates >= 1) __builtin_prefetch(io.s0 + i, 1);
  if constexpr (Kernel::kStates >= 2) __builtin_prefetch(io.s1 + i, 1);
}

template <class Ops, class Kernel, class G, class C>
void RunRange(const typename Kernel::Scalars& scalars, const RawLanes& raw, size_t begin,
              size_t end) {
  constexpr size_t kLine = 16;    // fp32 elements per 64-byte cache line
  constexpr size_t kAhead = 512;  // prefetch distance: 2 KiB of fp32 per stream
  static_assert(kLine % Ops::kWidth == 0);
  const Kernel kernel(scalars);  // broadcasts once per chunk, not per vector
  const Lanes<G, C> io = Typed<G, C>(raw);
  size_t i = begin;
  for (; i + kLine <= end; i += kLine) {
    if (i + kAhead < end) PrefetchAt<Ops, Kernel>(io, i + kAhead);
    for (size_t j = 0; j < kLine; j += Ops::kWidth) ApplyAt<Ops>(kernel, io, i + j);
  }
  for (; i + Ops::kWidth <= end; i += Ops::kWidth) ApplyAt<Ops>(kernel, io, i);
  if (i < end) ApplyTail<Ops>(kernel, io, i, end - i);
}

template <class Ops, template <class> class K>
void FillGrid(RangeGrid<typename K<Ops>::Scalars>& grid) {
  for (int g = 0; g < kNumDTypes; ++g) {
    for (int c = 0; c < kNumCopySlots; ++c) {
      grid[g][c] = VisitGradCopy(static_cast<DType>(g), c,
                                 []<class G, class C>() { return &RunRange<Ops, K<Ops>, G, C>; });
    }
  }
}

template <class Ops, int... kVariants>
void FillAdamGrids(KernelTable& t, std::integer_sequence<int, kVariants...>) {
  (FillGrid<Ops, AdamVariantKernel<kVariants>::template type>(t.adam[kVariants]), ...);
}

template <class Ops>
KernelTable MakeKernelTable() {
  KernelTable t;
  FillAdamGrids<Ops>(t, std::make_integer_sequence<int, kNumAdamVariants>());
  FillGrid<Ops, SgdPlainKernel>(t.sgd_plain);
  FillGrid<Ops, SgdMomentumKernel>(t.sgd_momentum);
  return t;
}

}  // namespace zero::cpu
