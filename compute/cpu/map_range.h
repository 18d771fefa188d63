// The CPU loop of the element-wise maps (elementwise_rules.h) at one SIMD
// level. Included only through cpu/maps_impl.h, by files compiled with
// that level's -m flags; templates over Ops for the reason given there.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "compute/cpu/map_table.h"
#include "compute/elementwise_op.h"
#include "compute/elementwise_rules.h"

namespace zero::cpu {

// The last partial vector, staged through zero-padded buffers so the same
// vector code (and so the same rounding) handles every element.
template <class Ops, class Rule>
void MapTail(typename Rule::Dst* dst, const typename Rule::Src* src, typename Ops::V scalar,
             size_t i, size_t count) {
  using D = typename Rule::Dst;
  using S = typename Rule::Src;
  D d[Ops::kWidth] = {};
  S s[Ops::kWidth] = {};
  if constexpr (Rule::kReadsDst) std::memcpy(d, dst + i, count * sizeof(D));
  if constexpr (!std::is_same_v<S, NoSource>) std::memcpy(s, src + i, count * sizeof(S));
  MapAt<Ops, Rule>(d, s, scalar, 0);
  std::memcpy(dst + i, d, count * sizeof(D));
}

template <class Ops, class Rule>
void MapRange(const ElementwiseOp& op, float scalar, size_t begin, size_t end) {
  auto* dst = static_cast<typename Rule::Dst*>(op.dst);
  const auto* src = static_cast<const typename Rule::Src*>(op.src);
  const typename Ops::V s = Ops::Set(scalar);
  size_t i = begin;
  for (; i + Ops::kWidth <= end; i += Ops::kWidth) MapAt<Ops, Rule>(dst, src, s, i);
  if (i < end) MapTail<Ops, Rule>(dst, src, s, i, end - i);
}

template <class Ops>
void FillMapTable(MapFn (&table)[kNumMapKinds][kNumDTypes]) {
  for (int k = 0; k < kNumMapKinds; ++k) {
    for (int t = 0; t < kNumDTypes; ++t) {
      table[k][t] = VisitMapRule(static_cast<ElementwiseKind>(k), static_cast<DType>(t),
                                 []<class Rule>() { return &MapRange<Ops, Rule>; });
    }
  }
}

}  // namespace zero::cpu
