#include "zero/comm/internal/host_reduce.h"

#include <algorithm>

namespace zero {
namespace {

template <ReduceOp kOp>
inline float Combine(float acc, float x) {
  if constexpr (kOp == ReduceOp::kMax) return (x > acc || x != x) ? x : acc;
  return acc + x;
}

template <ReduceOp kOp>
inline float Finish(float acc, float n) {
  if constexpr (kOp == ReduceOp::kAvg) return acc / n;
  return acc;
}

// Blocks keep the fp32 partial sums in L1; every read of element i happens
// before its write, which is what makes dst == sources[k] safe.
template <class T, ReduceOp kOp>
void Reduce(absl::Span<const void* const> sources, void* dst, size_t count) {
  constexpr size_t kBlock = 1024;
  float acc[kBlock];
  T* out = static_cast<T*>(dst);
  const float n = static_cast<float>(sources.size());
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t m = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(sources[0]) + base;
    for (size_t j = 0; j < m; ++j) acc[j] = ToFloat(first[j]);
    for (size_t r = 1; r < sources.size(); ++r) {
      const T* in = static_cast<const T*>(sources[r]) + base;
      for (size_t j = 0; j < m; ++j) acc[j] = Combine<kOp>(acc[j], ToFloat(in[j]));
    }
    for (size_t j = 0; j < m; ++j) out[base + j] = FromFloat<T>(Finish<kOp>(acc[j], n));
  }
}

template <class T>
void ReduceOfType(ReduceOp op, absl::Span<const void* const> sources, void* dst, size_t count) {
  switch (op) {
    case ReduceOp::kSum: return Reduce<T, ReduceOp::kSum>(sources, dst, count);
    case ReduceOp::kAvg: return Reduce<T, ReduceOp::kAvg>(sources, dst, count);
    case ReduceOp::kMax: return Reduce<T, ReduceOp::kMax>(sources, dst, count);
  }
}

}  // namespace

void HostReduce(DType dtype, ReduceOp op, absl::Span<const void* const> sources, void* dst,
                size_t count) {
  switch (dtype) {
    case DType::kF32: return ReduceOfType<float>(op, sources, dst, count);
    case DType::kBF16: return ReduceOfType<bf16>(op, sources, dst, count);
    case DType::kF16: return ReduceOfType<f16>(op, sources, dst, count);
  }
}

}  // namespace zero
