// The CUDA kernel runs the Adam rule with run-time choices (kDynamic, selects
// on masks) where the CPU uses compile-time ones. CI has no card, so this
// checks the run-time form here, with the scalar policy, against the
// optimizer's CPU kernels: every choice, bit for bit.
#include <vector>

#include "compute/cpu/isa.h"
#include "compute/cpu/ops_scalar.h"
#include "compute/elementwise.h"
#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "optimizers/adam_rule.h"
#include "optimizers/step_lanes.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {
namespace {

void StepDynamic(const AdamConfig& config, Problem& p, int64_t step) {
  const AdamScalars scalars = MakeAdamScalars(config, step, 1.0f);
  const AdamDynamicKernel<cpu::scalar::Ops> kernel(scalars);
  const Lanes<float, NoCopy> io = Typed<float, NoCopy>(LanesOf(p.Args(step)));
  for (size_t i = 0; i < p.size(); ++i) ApplyAt<cpu::scalar::Ops>(kernel, io, i);
}

TEST(AdamDynamicKernelTest, MatchesFixedChoiceKernels) {
  const std::vector<AdamConfig> configs = {
      AdamWDefaults(),                                   // decoupled decay
      {.lr = 1e-2, .weight_decay = 0.1},                 // L2
      {.beta1 = 0.3},                                    // the other lerp formula
      {.beta1 = 0.0, .weight_decay = 0.1},               // weight 1: signed zeros
      {.lr = 1e-2, .beta1 = 0.2, .weight_decay = 0.05},  // L2 and the other lerp
  };
  for (size_t k = 0; k < configs.size(); ++k) {
    auto opt = MakeAdam(configs[k]);
    ASSERT_TRUE(opt.ok());
    Problem fixed(301, DType::kF32, 2, std::nullopt, 11);
    Problem dynamic(301, DType::kF32, 2, std::nullopt, 11);
    // Early steps divide by sqrt(1 - beta2^step); from 16628 on it is exactly 1.
    for (int64_t step : {1, 2, 3, 20000, 20001}) {
      fixed.SetGrads(step);
      dynamic.SetGrads(step);
      ASSERT_TRUE((*opt)->Step(fixed.Args(step)).ok());
      StepDynamic(configs[k], dynamic, step);
      ASSERT_TRUE(SameResults(dynamic, fixed)) << "config " << k << " step " << step;
    }
  }
}

TEST(AdamDynamicKernelTest, VariantIndexCoversEveryChoice) {
  AdamScalars s{};
  s.bc2_sqrt = 1.0f;
  EXPECT_EQ(AdamVariant(s), 0);
  s.l2 = true;
  s.lerp_small = true;
  s.bc2_sqrt = 0.5f;
  EXPECT_EQ(AdamVariant(s), kNumAdamVariants - 1);
}

}  // namespace
}  // namespace zero::testing
