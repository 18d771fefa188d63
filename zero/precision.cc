#include "zero/precision.h"

namespace zero {
namespace {

// Calls fn with a typed pointer for the run-time dtype.
template <class Fn>
void Dispatch(DType dtype, const void* p, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(static_cast<const float*>(p));
    case DType::kBF16: return fn(static_cast<const bf16*>(p));
    case DType::kF16: return fn(static_cast<const f16*>(p));
  }
}

}  // namespace

void Widen(const void* src, DType dtype, float* dst, size_t count) {
  Dispatch(dtype, src, [&](const auto* s) {
    for (size_t i = 0; i < count; ++i) dst[i] = ToFloat(s[i]);
  });
}

void Narrow(const float* src, void* dst, DType dtype, size_t count) {
  Dispatch(dtype, dst, [&](const auto* d) {
    using T = std::remove_cvref_t<decltype(*d)>;
    T* out = const_cast<T*>(d);
    for (size_t i = 0; i < count; ++i) out[i] = FromFloat<T>(src[i]);
  });
}

void AccumulateNarrow(void* into, DType dtype, const float* from, size_t count) {
  Dispatch(dtype, into, [&](const auto* d) {
    using T = std::remove_cvref_t<decltype(*d)>;
    T* out = const_cast<T*>(d);
    for (size_t i = 0; i < count; ++i) out[i] = FromFloat<T>(ToFloat(out[i]) + from[i]);
  });
}

double SumOfSquares(const void* src, DType dtype, size_t count) {
  double sum = 0;
  Dispatch(dtype, src, [&](const auto* s) {
    for (size_t i = 0; i < count; ++i) {
      const double v = ToFloat(s[i]);
      sum += v * v;
    }
  });
  return sum;
}

}  // namespace zero
