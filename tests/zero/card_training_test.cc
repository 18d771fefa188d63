// The engine trained on one card, as bench/card_check.sh runs it: 1, 2 and 4
// ranks as threads sharing the card (one device, the local backend's stream
// path: the collectives' copies and sums run on the card), stages 0-3, fp32
// and bf16, 2 micro-batches, plus clipping, fp16 loss scaling, optimizer
// offload and parameter offload. Each run is compared with the same run on
// host devices, one per rank.
//
// What must be equal bit for bit: everything whose arithmetic is the same on
// both, i.e. every run without clipping (element-wise rules without fused
// operations, rank-order fp32 sums in the collectives, the same optimizer
// rule). Clipping differs by design: the card's sum of squares adds in its
// own fixed order (compute/cuda/elementwise_kernels.h), so the norm, the
// coefficient and the parameters may differ in their last bits; those runs
// are compared within a tolerance.
//
// Without a card the *OnTheCard cases skip (bench/card_check.sh's run mode
// counts a skip as a failure); the *OnOneHostDevice cases run everywhere:
// the same ranks sharing one host device must give the bits of one device
// per rank (what the card runs, minus the card).
#include <cmath>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

bool HasCard() {
  static const bool has = [] {
    DeviceSpec spec;
    spec.kind = DeviceSpec::Kind::kCuda;
    return DeviceSystem::Create(spec).ok();
  }();
  return has;
}

// ranks, stage, dtype; every run has 2 micro-batches.
using Case = std::tuple<int, int, DType>;

TrainingRun RunOf(int ranks, int stage, DType dtype) {
  TrainingRun run;
  run.world = ranks;
  run.steps = 3;
  run.config.stage = stage;
  run.config.param_dtype = dtype;
  run.config.gradient_accumulation_steps = 2;
  run.config.bucket_elements = 300;
  run.config.persistence_threshold = 40;
  run.config.prefetch_elements = 1000;
  run.config.reduce_chunk_elements = 256;
  return run;
}

// `shared` (the ranks on one device of `kind`) against one host device per
// rank; `tolerance` 0: bit for bit.
void ExpectSharedMatchesHost(TrainingRun run, DeviceSpec::Kind kind, float tolerance = 0) {
  auto model = MakeTransformer(2, 16, 2, 8, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<RankResult> host = TrainWithEngine(**model, run, AdamW());
  run.kind = kind;
  run.devices = 1;
  run.move_on_streams = true;  // host devices too: the card's path
  const std::vector<RankResult> shared = TrainWithEngine(**model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    const std::string who = "rank " + std::to_string(r);
    ASSERT_TRUE(host[r].status.ok()) << who << " on host devices: " << host[r].status;
    ASSERT_TRUE(shared[r].status.ok()) << who << " sharing one device: " << shared[r].status;
    if (tolerance == 0) {
      ExpectBitIdentical(host[r].params, shared[r].params, who);
      EXPECT_EQ(host[r].losses, shared[r].losses) << who;
      continue;
    }
    for (size_t i = 0; i < host[r].params.size(); ++i) {
      for (size_t j = 0; j < host[r].params[i].size(); ++j) {
        ASSERT_NEAR(host[r].params[i][j], shared[r].params[i][j], tolerance)
            << who << " param " << i << "[" << j << "]";
      }
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [ranks, stage, dtype] = info.param;
  return std::to_string(ranks) + "ranks_stage" + std::to_string(stage) + "_" +
         std::string(Name(dtype));
}

class CardTraining : public ::testing::TestWithParam<Case> {};

TEST_P(CardTraining, OnTheCard) {
  if (!HasCard()) GTEST_SKIP() << "no card";
  const auto& [ranks, stage, dtype] = GetParam();
  ExpectSharedMatchesHost(RunOf(ranks, stage, dtype), DeviceSpec::Kind::kCuda);
}

INSTANTIATE_TEST_SUITE_P(Matrix, CardTraining,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         CaseName);

// On host devices 4 ranks only (a separate suite, so nothing here skips on
// the card, where card_check.sh counts a skip as a failure).
class SharedHostDevice : public ::testing::TestWithParam<Case> {};

TEST_P(SharedHostDevice, OnOneHostDevice) {
  const auto& [ranks, stage, dtype] = GetParam();
  ExpectSharedMatchesHost(RunOf(ranks, stage, dtype), DeviceSpec::Kind::kHost);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SharedHostDevice,
                         ::testing::Combine(::testing::Values(4), ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(DType::kF32, DType::kBF16)),
                         CaseName);

// The modes, at 4 ranks: on the card when there is one, else on one host
// device.
DeviceSpec::Kind Shared() { return HasCard() ? DeviceSpec::Kind::kCuda : DeviceSpec::Kind::kHost; }

TEST(CardTrainingModes, ClippingWithinTheSumOrdersTolerance) {
  TrainingRun run = RunOf(4, 2, DType::kF32);
  run.config.max_grad_norm = 0.05;  // below the gradients' norm: the coefficient acts
  // One ulp of the norm moves a step by about lr * 1e-7: 3 steps, lr 1e-2.
  ExpectSharedMatchesHost(run, Shared(), HasCard() ? 1e-6f : 0);
}

TEST(CardTrainingModes, Fp16LossScaling) {
  ExpectSharedMatchesHost(RunOf(4, 2, DType::kF16), Shared());
}

TEST(CardTrainingModes, OptimizerOffload) {
  TrainingRun run = RunOf(4, 2, DType::kBF16);
  run.config.offload = Offload::kOptimizer;
  ExpectSharedMatchesHost(run, Shared());
}

TEST(CardTrainingModes, ParameterOffload) {
  TrainingRun run = RunOf(4, 3, DType::kBF16);
  run.config.offload = Offload::kParameters;
  ExpectSharedMatchesHost(run, Shared());
}

}  // namespace
}  // namespace zero::testing_model
