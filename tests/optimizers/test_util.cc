#include "tests/optimizers/test_util.h"

#include <random>

namespace zero::testing {

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale) {
  // About one value in ten is special: zeros of both signs, subnormals, tiny, big.
  constexpr float kSpecial[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1e-20f, -4e-21f, 700.0f};
  constexpr uint32_t kSpecials = sizeof(kSpecial) / sizeof(kSpecial[0]);
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = rng();
    // Built from bits, not std::*_distribution, whose output varies by library.
    const float unit = static_cast<float>(r >> 8) * 0x1p-24f;  // [0, 1)
    const uint32_t pick = r % 67;
    out[i] = pick < kSpecials ? kSpecial[pick] : (unit - 0.5f) * 2.0f * scale;
  }
  return out;
}

std::vector<uint8_t> Encode(std::span<const float> values, DType dtype) {
  std::vector<uint8_t> out(values.size() * SizeOf(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t bits =
          dtype == DType::kBF16 ? FloatToBF16(values[i]).bits : FloatToF16(values[i]).bits;
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}

float DecodeAt(const void* data, DType dtype, size_t i) {
  switch (dtype) {
    case DType::kBF16:
      return BF16ToFloat(static_cast<const bf16*>(data)[i]);
    case DType::kF16:
      return F16ToFloat(static_cast<const f16*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

std::string KindName(Kind kind) {
  switch (kind) {
    case Kind::kAdam:
      return "Adam";
    case Kind::kAdamW:
      return "AdamW";
    case Kind::kAdamWSmallBeta1:
      return "AdamWBeta1Low";
    case Kind::kSgd:
      return "Sgd";
    case Kind::kSgdMomentum:
      return "SgdMomentum";
    case Kind::kSgdNesterov:
      return "SgdNesterov";
  }
  return "Unknown";
}

AnyConfig ConfigFor(Kind kind) {
  switch (kind) {
    case Kind::kAdam:
      return AdamConfig{.lr = 1e-2, .weight_decay = 0.1};
    case Kind::kAdamW:
      return AdamWDefaults();
    case Kind::kAdamWSmallBeta1:  // beta1 < 0.5 takes torch's other lerp formula
      return AdamConfig{.lr = 3e-3,
                        .beta1 = 0.3,
                        .beta2 = 0.95,
                        .weight_decay = 0.05,
                        .decoupled_weight_decay = true};
    case Kind::kSgd:
      return SgdConfig{.lr = 0.1, .weight_decay = 1e-3};
    case Kind::kSgdMomentum:
      return SgdConfig{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-4};
    case Kind::kSgdNesterov:
      return SgdConfig{.lr = 0.05, .momentum = 0.9, .nesterov = true};
  }
  return AdamConfig{};
}

std::unique_ptr<Optimizer> MakeOptimizerFor(const AnyConfig& config) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = std::holds_alternative<AdamConfig>(config)
                                                       ? MakeAdam(std::get<AdamConfig>(config))
                                                       : MakeSgd(std::get<SgdConfig>(config));
  EXPECT_TRUE(opt.ok()) << opt.status();
  return opt.ok() ? std::move(opt).value() : nullptr;
}

Problem::Problem(size_t n, DType grad_dtype, int state_buffers, std::optional<DType> copy_dtype,
                 uint32_t seed)
    : params(RandomFloats(n, seed, 1.0f)),
      grad_dtype(grad_dtype),
      state(static_cast<size_t>(state_buffers), std::vector<float>(n, 0.0f)),
      copy(copy_dtype ? n * SizeOf(*copy_dtype) : 0, 0),
      copy_dtype(copy_dtype),
      seed_(seed) {
  SetGrads(1);
}

void Problem::SetGrads(int64_t step) {
  grads =
      Encode(RandomFloats(size(), seed_ * 7919u + static_cast<uint32_t>(step), 0.5f), grad_dtype);
}

StepArgs Problem::Args(int64_t step, size_t begin, size_t end, float grad_scale) {
  slice_state_.clear();
  for (std::vector<float>& s : state) slice_state_.emplace_back(s.data() + begin, end - begin);
  StepArgs args;
  args.params = std::span<float>(params.data() + begin, end - begin);
  args.grads = grads.data() + begin * SizeOf(grad_dtype);
  args.grad_dtype = grad_dtype;
  args.state = slice_state_;
  args.step = step;
  args.grad_scale = grad_scale;
  if (copy_dtype) {
    args.param_copy = copy.data() + begin * SizeOf(*copy_dtype);
    args.copy_dtype = *copy_dtype;
  }
  return args;
}

void RunSteps(Optimizer& opt, Problem& p, int steps, float grad_scale) {
  for (int step = 1; step <= steps; ++step) {
    p.SetGrads(step);
    ASSERT_TRUE(opt.Step(p.Args(step, 0, p.size(), grad_scale)).ok());
  }
}

::testing::AssertionResult SameResults(const Problem& a, const Problem& b) {
  if (auto r = SameBits(a.params, b.params); !r) return r << " (params)";
  for (size_t i = 0; i < a.state.size() && i < b.state.size(); ++i) {
    if (auto r = SameBits(a.state[i], b.state[i]); !r) return r << " (state " << i << ")";
  }
  if (auto r = SameBits(a.copy, b.copy); !r) return r << " (copy bytes)";
  return ::testing::AssertionSuccess();
}

}  // namespace zero::testing
