// Load, update and store of one element position (one SIMD vector wide),
// shared by the CPU loops and the CUDA kernels, and the mapping from run-time
// dtypes to the compile-time element types those loops are built for.
#pragma once

#include <cstddef>
#include <type_traits>

#include "base/dtype.h"
#include "base/host_device.h"

namespace zero {

// Element type of an absent parameter copy: nothing is loaded or stored.
struct NoCopy {};

// Copy slots: 0 = no copy, 1 + int(DType) otherwise.
inline constexpr int kNumCopySlots = 1 + kNumDTypes;
constexpr int CopySlot(const void* copy, DType dtype) {
  return copy == nullptr ? 0 : 1 + static_cast<int>(dtype);
}

// The untyped pointers of one update; s0/s1 are state buffers (null if unused).
struct RawLanes {
  float* p;
  const void* g;
  float* s0;
  float* s1;
  void* copy;
};

template <class G, class C>
struct Lanes {
  float* p;
  const G* g;
  float* s0;
  float* s1;
  C* copy;
};

// Always inlined: the SIMD translation units instantiate it too (cpu/kernels_impl.h).
template <class G, class C>
ZERO_HD ZERO_INLINE Lanes<G, C> Typed(const RawLanes& r) {
  return {r.p, static_cast<const G*>(r.g), r.s0, r.s1, static_cast<C*>(r.copy)};
}

// Updates the Ops::kWidth elements at index i of `io` with `kernel`.
template <class Ops, class Kernel, class G, class C>
ZERO_HD ZERO_INLINE void ApplyAt(const Kernel& kernel, const Lanes<G, C>& io, size_t i) {
  using V = typename Ops::V;
  V p = Ops::Load(io.p + i);
  const V g = Ops::Load(io.g + i);
  V s0 = Ops::Zero();
  V s1 = Ops::Zero();
  if constexpr (Kernel::kStates >= 1) s0 = Ops::Load(io.s0 + i);
  if constexpr (Kernel::kStates >= 2) s1 = Ops::Load(io.s1 + i);
  kernel(p, g, s0, s1);
  Ops::Store(io.p + i, p);
  if constexpr (Kernel::kStates >= 1) Ops::Store(io.s0 + i, s0);
  if constexpr (Kernel::kStates >= 2) Ops::Store(io.s1 + i, s1);
  if constexpr (!std::is_same_v<C, NoCopy>) Ops::Store(io.copy + i, p);
}

// Calls f.template operator()<G, C>() with the element types of a grad dtype
// and a copy slot: the one place run-time dtypes become template arguments.
template <class G, class F>
decltype(auto) VisitCopySlot(int copy_slot, F& f) {
  switch (copy_slot) {
    case 1:
      return f.template operator()<G, float>();
    case 2:
      return f.template operator()<G, bf16>();
    case 3:
      return f.template operator()<G, f16>();
    default:
      return f.template operator()<G, NoCopy>();
  }
}

template <class F>
decltype(auto) VisitGradCopy(DType grad, int copy_slot, F&& f) {
  switch (grad) {
    case DType::kBF16:
      return VisitCopySlot<bf16>(copy_slot, f);
    case DType::kF16:
      return VisitCopySlot<f16>(copy_slot, f);
    default:
      return VisitCopySlot<float>(copy_slot, f);
  }
}

}  // namespace zero
