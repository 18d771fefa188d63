#include "optimizers/adam.h"

#include <cmath>
#include <vector>

#include "compute/cpu/isa.h"
#include "gtest/gtest.h"
#include "tests/optimizers/reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

TEST(AdamTest, DefaultsAreTorchs) {
  const AdamConfig adam;
  EXPECT_EQ(adam.lr, 1e-3);
  EXPECT_EQ(adam.beta1, 0.9);
  EXPECT_EQ(adam.beta2, 0.999);
  EXPECT_EQ(adam.eps, 1e-8);
  EXPECT_EQ(adam.weight_decay, 0.0);
  EXPECT_FALSE(adam.decoupled_weight_decay);
  const AdamConfig adamw = AdamWDefaults();
  EXPECT_EQ(adamw.weight_decay, 1e-2);
  EXPECT_TRUE(adamw.decoupled_weight_decay);
}

TEST(AdamTest, NamesAndState) {
  auto adam = MakeAdam();
  auto adamw = MakeAdamW();
  ASSERT_TRUE(adam.ok() && adamw.ok());
  EXPECT_EQ((*adam)->name(), "adam");
  EXPECT_EQ((*adamw)->name(), "adamw");
  EXPECT_EQ((*adam)->state_buffers(), 2);
  EXPECT_EQ((*adamw)->lr(), 1e-3);
}

// One element, first step, worked by hand: Adam's first step moves each
// weight by about lr against the gradient's sign.
TEST(AdamTest, FirstStepByHand) {
  auto opt = MakeAdamW();  // lr 1e-3, wd 1e-2
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {1.0f}, g = {0.5f}, m = {0.0f}, v = {0.0f};
  const std::vector<std::span<float>> state = {m, v};
  StepArgs args{.params = p, .grads = g.data(), .state = state, .step = 1};
  ASSERT_TRUE((*opt)->Step(args).ok());
  EXPECT_FLOAT_EQ(m[0], 0.05f);
  EXPECT_FLOAT_EQ(v[0], 0.00025f);
  // p * (1 - 1e-5) - 1e-3 * (0.05 / 0.1) / (sqrt(0.00025 / 0.001) + 1e-8)
  EXPECT_NEAR(p[0], 0.99999 - 1e-3, 1e-7);
}

struct Variant {
  const char* name;
  AdamConfig config;
  float grad_scale;
};

// Each option of torch's Adam against the reference, over several steps.
TEST(AdamTest, EveryOptionMatchesTorchReference) {
  const std::vector<Variant> variants = {
      {"default", AdamConfig{}, 1.0f},
      {"l2", {.lr = 1e-2, .weight_decay = 0.1}, 1.0f},
      {"adamw", AdamWDefaults(), 1.0f},
      {"adamw_unscale", AdamWDefaults(), 1.0f / 65536},
      {"beta1_low", {.beta1 = 0.2, .beta2 = 0.9}, 1.0f},
      {"beta1_zero", {.beta1 = 0.0}, 1.0f},
      {"beta1_half", {.beta1 = 0.5}, 1.0f},  // weight 0.5 is "not small"
      {"beta2_zero", {.beta2 = 0.0}, 1.0f},
      {"maximize", {.lr = 1e-2, .weight_decay = 0.1, .maximize = true}, 0.5f},
      {"lr_zero", {.lr = 0.0, .weight_decay = 0.1, .decoupled_weight_decay = true}, 1.0f},
      {"big_eps", {.eps = 1e-2}, 3.0f},
  };
  for (const Variant& variant : variants) {
    auto opt = MakeAdam(variant.config);
    ASSERT_TRUE(opt.ok()) << variant.name;
    Problem actual(777, DType::kF32, 2, std::nullopt, 3);
    Problem expected(777, DType::kF32, 2, std::nullopt, 3);
    for (int step = 1; step <= 5; ++step) {
      actual.SetGrads(step);
      expected.SetGrads(step);
      ASSERT_TRUE((*opt)->Step(actual.Args(step, 0, actual.size(), variant.grad_scale)).ok());
      ReferenceAdamStep(variant.config, step, variant.grad_scale, expected);
    }
    EXPECT_TRUE(SameResults(actual, expected)) << variant.name;
  }
}

// From step 16628 (beta2 = 0.999) sqrt(1 - beta2^step) rounds to 1 and
// the CPU runs a kernel without that division: it must change no bit.
TEST(AdamTest, LateStepsMatchTorchReferenceAtEverySimdLevel) {
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    if (!cpu::IsSupported(isa)) continue;
    ASSERT_TRUE(cpu::SetCpuIsa(isa).ok());
    for (const AdamConfig& config : {AdamWDefaults(), AdamConfig{.weight_decay = 0.01}}) {
      auto opt = MakeAdam(config);
      ASSERT_TRUE(opt.ok());
      Problem actual(333, DType::kBF16, 2, DType::kF16, 9);
      Problem expected(333, DType::kBF16, 2, DType::kF16, 9);
      for (int64_t step : {16000, 16627, 16628, 20000, 1000000}) {
        actual.SetGrads(step);
        expected.SetGrads(step);
        ASSERT_TRUE((*opt)->Step(actual.Args(step)).ok());
        ReferenceAdamStep(config, step, 1.0f, expected);
        ReferenceCopy(expected);
        ASSERT_TRUE(SameResults(actual, expected)) << cpu::Name(isa) << " step " << step;
      }
    }
  }
  ASSERT_TRUE(cpu::SetCpuIsa(cpu::BestCpuIsa()).ok());
}

TEST(AdamTest, SetLrTakesEffectAndRejectsNegative) {
  auto opt = MakeAdam();
  ASSERT_TRUE(opt.ok());
  EXPECT_TRUE((*opt)->set_lr(0.5).ok());
  EXPECT_EQ((*opt)->lr(), 0.5);
  EXPECT_EQ((*opt)->set_lr(-1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*opt)->lr(), 0.5);

  Problem actual(64, DType::kF32, 2, std::nullopt);
  Problem expected(64, DType::kF32, 2, std::nullopt);
  ASSERT_TRUE((*opt)->Step(actual.Args(1)).ok());
  ReferenceAdamStep({.lr = 0.5}, 1, 1.0f, expected);
  EXPECT_TRUE(SameResults(actual, expected));
}

TEST(AdamTest, BadHyperParametersAreInvalidArgument) {
  const std::vector<AdamConfig> bad = {
      {.lr = -1e-3},   {.lr = std::nan("")},   {.beta1 = 1.0},
      {.beta1 = -0.1}, {.beta2 = 1.0},         {.beta2 = -1.0},
      {.eps = -1e-8},  {.weight_decay = -0.1}, {.lr = INFINITY},
  };
  for (const AdamConfig& config : bad) {
    EXPECT_EQ(MakeAdam(config).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(MakeAdamW(config).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace zero::testing
