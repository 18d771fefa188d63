// PlaceStates against the ZeRO paper's per-rank model-state formulas, and
// offload's split between device and host, without running an engine.
#include "zero/placement.h"

#include <cstddef>

#include "gtest/gtest.h"

namespace zero {
namespace {

constexpr size_t kPsi = 7'500'000 * 64;  // divisible by every N below

EngineConfig Config(int stage, DType dtype, Offload offload = Offload::kNone) {
  EngineConfig c;
  c.stage = stage;
  c.param_dtype = dtype;
  c.offload = offload;
  return c;
}

// Device bytes per rank with Adam (2 state buffers).
size_t DeviceBytes(int stage, DType dtype, size_t n) {
  return PlaceStates(Config(stage, dtype), 2, kPsi, kPsi / n).bytes(Home::kDevice);
}

TEST(PlacementTest, MixedPrecisionAdamIsThePapersTable) {
  for (size_t n : {1, 8, 64}) {
    EXPECT_EQ(DeviceBytes(0, DType::kBF16, n), 16 * kPsi) << n;
    EXPECT_EQ(DeviceBytes(1, DType::kBF16, n), 4 * kPsi + 12 * kPsi / n) << n;
    EXPECT_EQ(DeviceBytes(2, DType::kBF16, n), 2 * kPsi + 14 * kPsi / n) << n;
    EXPECT_EQ(DeviceBytes(3, DType::kF16, n), 16 * kPsi / n) << n;
    EXPECT_EQ(PlaceStates(Config(2, DType::kBF16), 2, kPsi, kPsi / n).bytes(Home::kHost), 0u);
  }
}

TEST(PlacementTest, Fp32KeepsNoSeparateMasterWeights) {
  const size_t n = 8;
  EXPECT_EQ(DeviceBytes(0, DType::kF32, n), 16 * kPsi);  // params, grads, two moments
  EXPECT_EQ(DeviceBytes(1, DType::kF32, n), 8 * kPsi + 8 * kPsi / n);
  EXPECT_EQ(DeviceBytes(2, DType::kF32, n), 4 * kPsi + 12 * kPsi / n);
  EXPECT_EQ(DeviceBytes(3, DType::kF32, n), 16 * kPsi / n);
  EXPECT_EQ(PlaceStates(Config(2, DType::kF32), 2, kPsi, kPsi / n)[State::kMaster].home,
            Home::kNone);
}

TEST(PlacementTest, StageOneAccumulationNeedsOwnedGradients) {
  EngineConfig c = Config(1, DType::kF32);
  EXPECT_EQ(PlaceStates(c, 2, kPsi, kPsi / 4)[State::kOwnedGrads].home, Home::kNone);
  c.gradient_accumulation_steps = 2;
  EXPECT_EQ(PlaceStates(c, 2, kPsi, kPsi / 4)[State::kOwnedGrads].home, Home::kDevice);
}

TEST(PlacementTest, OptimizerOffloadLeavesOnlyParametersOnTheDevice) {
  const size_t n = 8, shard = kPsi / n;
  const Placement p = PlaceStates(Config(2, DType::kBF16, Offload::kOptimizer), 2, kPsi, shard);
  EXPECT_EQ(p.bytes(Home::kDevice), 2 * kPsi);
  // fp32 master + two moments + bf16 owned gradients + the CPU step's bf16 copy.
  EXPECT_EQ(p.bytes(Home::kHost), (12 + 2 + 2) * shard);
  // Stage 1 still reduces whole gradients on the device.
  const Placement s1 = PlaceStates(Config(1, DType::kBF16, Offload::kOptimizer), 2, kPsi, shard);
  EXPECT_EQ(s1.bytes(Home::kDevice), 4 * kPsi);
  EXPECT_EQ(s1[State::kOwnedGrads].home, Home::kHost);
}

TEST(PlacementTest, ParameterOffloadLeavesNothingOnTheDevice) {
  const size_t n = 8, shard = kPsi / n;
  const Placement p =
      PlaceStates(Config(3, DType::kBF16, Offload::kParameters), 2, kPsi, shard);
  EXPECT_EQ(p.bytes(Home::kDevice), 0u);
  EXPECT_EQ(p.bytes(Home::kHost), 16 * shard) << "the parameters are their own host copy";
  EXPECT_EQ(p[State::kHostParams].home, Home::kNone);
}

TEST(PlacementTest, SgdWithoutMomentumHasNoState) {
  const Placement p = PlaceStates(Config(2, DType::kF32), 0, kPsi, kPsi / 4);
  EXPECT_EQ(p[State::kOptimizer].home, Home::kNone);
  EXPECT_EQ(p.bytes(Home::kDevice), 4 * kPsi + 4 * kPsi / 4);
}

}  // namespace
}  // namespace zero
