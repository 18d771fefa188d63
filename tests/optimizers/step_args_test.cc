// Misuse of StepArgs is an error value, never a crash.
#include <vector>

#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"

namespace zero {
namespace {

class StepArgsTest : public ::testing::Test {
 protected:
  StepArgsTest() : p(8, 1.0f), g(8, 0.5f), m(8, 0.0f), v(8, 0.0f), state{m, v} {}

  StepArgs Good() { return StepArgs{.params = p, .grads = g.data(), .state = state, .step = 1}; }

  std::vector<float> p, g, m, v;
  std::vector<std::span<float>> state;
};

TEST_F(StepArgsTest, GoodArgsPass) { EXPECT_TRUE(ValidateStepArgs(Good(), 2).ok()); }

TEST_F(StepArgsTest, EveryMistakeIsInvalidArgument) {
  std::vector<StepArgs> bad(9, Good());
  bad[0].grads = nullptr;
  bad[1].step = 0;
  bad[2].grad_scale = INFINITY;
  bad[3].grad_dtype = static_cast<DType>(9);
  bad[4].state = std::span<const std::span<float>>(state).first(1);
  std::vector<std::span<float>> short_state = {m, std::span<float>(v).first(7)};
  bad[5].state = short_state;
  bad[6].param_copy = g.data();
  bad[6].copy_dtype = static_cast<DType>(4);
  std::vector<std::span<float>> null_state = {m, std::span<float>(static_cast<float*>(nullptr), 8)};
  bad[7].state = null_state;
  const float scales[2] = {1.0f, 1.0f};
  bad[8].grad_scale_at =
      reinterpret_cast<const float*>(reinterpret_cast<const char*>(scales) + 2);
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(ValidateStepArgs(bad[i], 2).code(), absl::StatusCode::kInvalidArgument) << i;
  }
}

TEST_F(StepArgsTest, OptimizersRejectMismatchesWithoutTouchingData) {
  auto adam = MakeAdamW();
  auto sgd = MakeSgd({.momentum = 0.9});
  ASSERT_TRUE(adam.ok() && sgd.ok());
  StepArgs args = Good();
  std::vector<std::span<float>> short_state = {m, std::span<float>(v).first(4)};
  args.state = short_state;
  EXPECT_EQ((*adam)->Step(args).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*sgd)->Step(Good()).code(), absl::StatusCode::kInvalidArgument);  // 2 buffers, wants 1
  EXPECT_EQ((*adam)->StepCuda(args, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p, std::vector<float>(8, 1.0f));
}

TEST_F(StepArgsTest, EmptySliceIsFine) {
  auto adam = MakeAdam();
  ASSERT_TRUE(adam.ok());
  const std::vector<std::span<float>> empty_state(2);
  StepArgs args;
  args.state = empty_state;
  EXPECT_TRUE((*adam)->Step(args).ok());
}

}  // namespace
}  // namespace zero
