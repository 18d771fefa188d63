// Shared pieces of the optimizer tests: deterministic data, a problem (params,
// grads, state, copy) that can be stepped whole or in slices, and bit-exact
// comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"

namespace zero::testing {

// Mixed signs and magnitudes (about `scale`), with zeros of both signs, tiny
// and subnormal values sprinkled in. Same seed, same values.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f);

// Converts fp32 values to `dtype` storage (raw bytes).
std::vector<uint8_t> Encode(std::span<const float> values, DType dtype);

// Element i of raw `dtype` storage, as fp32.
float DecodeAt(const void* data, DType dtype, size_t i);

// Which optimizer a parameterized test runs.
enum class Kind { kAdam, kAdamW, kAdamWSmallBeta1, kSgd, kSgdMomentum, kSgdNesterov };
inline constexpr Kind kAllKinds[] = {Kind::kAdam, Kind::kAdamW,       Kind::kAdamWSmallBeta1,
                                     Kind::kSgd,  Kind::kSgdMomentum, Kind::kSgdNesterov};
std::string KindName(Kind kind);
using AnyConfig = std::variant<AdamConfig, SgdConfig>;
AnyConfig ConfigFor(Kind kind);
std::unique_ptr<Optimizer> MakeOptimizerFor(const AnyConfig& config);
inline std::unique_ptr<Optimizer> MakeOptimizerFor(Kind kind) {
  return MakeOptimizerFor(ConfigFor(kind));
}

// A flat problem: fp32 params, grads of one dtype (new values every step),
// zero-initialized state and an optional low-precision copy.
class Problem {
 public:
  Problem(size_t n, DType grad_dtype, int state_buffers, std::optional<DType> copy_dtype,
          uint32_t seed = 1);

  // Regenerates the gradients for `step` (deterministic in seed and step).
  void SetGrads(int64_t step);
  // Arguments for elements [begin, end). Valid until the next call.
  StepArgs Args(int64_t step, size_t begin, size_t end, float grad_scale = 1.0f);
  StepArgs Args(int64_t step) { return Args(step, 0, size()); }

  size_t size() const { return params.size(); }

  std::vector<float> params;
  std::vector<uint8_t> grads;
  DType grad_dtype;
  std::vector<std::vector<float>> state;
  std::vector<uint8_t> copy;
  std::optional<DType> copy_dtype;

 private:
  uint32_t seed_;
  std::vector<std::span<float>> slice_state_;
};

// Steps `opt` on `p` for steps 1..steps, whole array, each step new grads.
void RunSteps(Optimizer& opt, Problem& p, int steps, float grad_scale = 1.0f);

// Success when a and b hold the same bytes; otherwise names the first
// differing element.
template <class T>
::testing::AssertionResult SameBits(std::span<const T> a, std::span<const T> b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "first difference at element " << i;
    }
  }
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult SameBits(const std::vector<float>& a,
                                           const std::vector<float>& b) {
  return SameBits<float>(a, b);
}
inline ::testing::AssertionResult SameBits(const std::vector<uint8_t>& a,
                                           const std::vector<uint8_t>& b) {
  return SameBits<uint8_t>(a, b);
}

// Everything a step writes: params, state, copy.
::testing::AssertionResult SameResults(const Problem& a, const Problem& b);

}  // namespace zero::testing
