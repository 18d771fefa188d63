#include "optimizers/sgd.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/optimizers/reference.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

TEST(SgdTest, DefaultsAreTorchs) {
  const SgdConfig c;
  EXPECT_EQ(c.lr, 1e-3);
  EXPECT_EQ(c.momentum, 0.0);
  EXPECT_EQ(c.dampening, 0.0);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_FALSE(c.nesterov);
  EXPECT_FALSE(c.maximize);
}

TEST(SgdTest, StateBuffersFollowMomentum) {
  auto plain = MakeSgd();
  auto momentum = MakeSgd({.momentum = 0.9});
  ASSERT_TRUE(plain.ok() && momentum.ok());
  EXPECT_EQ((*plain)->name(), "sgd");
  EXPECT_EQ((*plain)->state_buffers(), 0);
  EXPECT_EQ((*momentum)->state_buffers(), 1);
}

// torch starts the buffer as a clone of the gradient: dampening does not
// apply on step 1, and whatever the buffer held before is ignored.
TEST(SgdTest, FirstStepCopiesGradIntoBuffer) {
  auto opt = MakeSgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {1.0f, 2.0f}, g = {0.5f, -4.0f}, buf = {123.0f, NAN};
  const std::vector<std::span<float>> state = {buf};
  StepArgs args{.params = p, .grads = g.data(), .state = state, .step = 1};
  ASSERT_TRUE((*opt)->Step(args).ok());
  EXPECT_EQ(buf[0], 0.5f);
  EXPECT_EQ(buf[1], -4.0f);
  EXPECT_EQ(p[0], 1.0f + -0.1f * 0.5f);
  args.step = 2;
  ASSERT_TRUE((*opt)->Step(args).ok());
  EXPECT_EQ(buf[0], 0.5f * 0.9f + 0.5f * 0.5f);
}

TEST(SgdTest, EveryOptionMatchesTorchReference) {
  const std::vector<SgdConfig> configs = {
      {},
      {.lr = 0.1, .weight_decay = 0.01},
      {.lr = 0.1, .momentum = 0.9},
      {.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 1e-3},
      {.lr = 0.1, .momentum = 0.5, .nesterov = true},
      {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = true, .maximize = true},
      {.lr = 0.0, .momentum = 0.9},
  };
  for (size_t k = 0; k < configs.size(); ++k) {
    auto opt = MakeSgd(configs[k]);
    ASSERT_TRUE(opt.ok());
    const int buffers = (*opt)->state_buffers();
    Problem actual(555, DType::kF32, buffers, std::nullopt, 4);
    Problem expected(555, DType::kF32, buffers, std::nullopt, 4);
    for (int step = 1; step <= 5; ++step) {
      const float scale = step == 3 ? 0.125f : 1.0f;
      actual.SetGrads(step);
      expected.SetGrads(step);
      ASSERT_TRUE((*opt)->Step(actual.Args(step, 0, actual.size(), scale)).ok());
      ReferenceSgdStep(configs[k], step, scale, expected);
    }
    EXPECT_TRUE(SameResults(actual, expected)) << "config " << k;
  }
}

TEST(SgdTest, BadHyperParametersAreInvalidArgument) {
  const std::vector<SgdConfig> bad = {
      {.lr = -0.1},
      {.lr = std::nan("")},
      {.momentum = -0.9},
      {.weight_decay = -1.0},
      {.dampening = INFINITY},
      {.nesterov = true},                                     // no momentum
      {.momentum = 0.9, .dampening = 0.1, .nesterov = true},  // dampening
  };
  for (const SgdConfig& config : bad) {
    EXPECT_EQ(MakeSgd(config).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace zero::testing
