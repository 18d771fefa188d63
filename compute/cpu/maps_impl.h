// Builds a MapTable for one arithmetic policy `Ops`. Included only by files
// compiled with one level's -m flags (maps_<level>.cc). Everything here is a
// template over Ops: an inline function that two such files both emit out
// of line becomes one weak symbol, and the linker may keep the AVX-512 copy
// for every caller, which then dies on a CPU without AVX-512.
#pragma once

#include <cstddef>

#include "compute/cpu/map_range.h"
#include "compute/cpu/map_table.h"
#include "compute/elementwise.h"
#include "compute/elementwise_rules.h"

namespace zero::cpu {

// Inf and NaN are the values whose exponent bits are all ones. A running max
// of the masked exponent reaches the mask exactly then; the fixed-size block
// lets the compiler vectorize the max and still stop early.
template <class Ops, class T>
bool AnyNonFiniteRange(const void* data, size_t begin, size_t end) {
  using Bits = typename ExponentField<T>::Bits;
  constexpr Bits kMask = ExponentField<T>::kMask;
  const Bits* x = static_cast<const Bits*>(data);
  constexpr size_t kBlock = 1024;
  size_t i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    Bits acc = 0;
    for (size_t j = 0; j < kBlock; ++j) {
      const Bits e = x[i + j] & kMask;
      acc = e > acc ? e : acc;
    }
    if (acc == kMask) return true;
  }
  for (; i < end; ++i) {
    if (IsNonFinite<T>(x[i])) return true;
  }
  return false;
}

template <class Ops>
MapTable MakeMapTable() {
  MapTable t;
  for (int d = 0; d < kNumDTypes; ++d) {
    t.any_nonfinite[d] = VisitDType(static_cast<DType>(d),
                                    []<class T>() { return &AnyNonFiniteRange<Ops, T>; });
  }
  FillMapTable<Ops>(t.map);
  return t;
}

}  // namespace zero::cpu
