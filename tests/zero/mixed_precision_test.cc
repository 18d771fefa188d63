// bf16 and fp16 training: fp32 master pieces, fp32 reductions, dynamic loss
// scaling. Every stage does the same arithmetic, so at one precision all
// stages agree bit for bit; against fp32 the loss agrees within a tolerance.
#include <cmath>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

TrainingRun MixedRun(DType dtype, int world) {
  TrainingRun run;
  run.world = world;
  run.steps = 12;
  run.config.param_dtype = dtype;
  run.config.gradient_accumulation_steps = 2;
  run.config.bucket_elements = 300;  // many units, so pieces cross parameters
  run.config.persistence_threshold = 0;
  return run;
}

// Trains at every stage; returns rank 0 of stage 0 after checking that
// every rank of every stage holds the same parameters and saw the same losses.
RankResult TrainAllStagesAlike(const Model& model, TrainingRun run) {
  RankResult first;
  for (int stage : {0, 1, 2, 3}) {
    run.config.stage = stage;
    std::vector<RankResult> ranks = TrainWithEngine(model, run, AdamW());
    for (int r = 0; r < run.world; ++r) {
      const std::string who = "stage " + std::to_string(stage) + " rank " + std::to_string(r);
      EXPECT_TRUE(ranks[r].status.ok()) << who << ": " << ranks[r].status;
      if (!ranks[r].status.ok()) return first;
      if (stage == 0 && r == 0) first = ranks[0];
      ExpectBitIdentical(first.params, ranks[r].params, who);
      EXPECT_EQ(ranks[r].stats.steps + ranks[r].stats.skipped_steps, run.steps) << who;
      EXPECT_EQ(ranks[r].stats.skipped_steps, first.stats.skipped_steps) << who;
      EXPECT_EQ(ranks[r].stats.loss_scale, first.stats.loss_scale) << who;
    }
  }
  return first;
}

using Case = std::tuple<DType, int>;  // model dtype, ranks

class MixedPrecision : public ::testing::TestWithParam<Case> {};

TEST_P(MixedPrecision, EveryStageIsBitIdenticalAndTracksFp32) {
  const auto [dtype, world] = GetParam();
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  const RankResult mixed = TrainAllStagesAlike(*model, MixedRun(dtype, world));
  if (::testing::Test::HasFailure()) return;
  TrainingRun fp32 = MixedRun(DType::kF32, world);
  const RankResult reference = TrainWithEngine(*model, fp32, AdamW())[0];
  ASSERT_TRUE(reference.status.ok()) << reference.status;
  // The losses fall alike: within 5% of fp32's at every step (bf16 keeps 8
  // bits of mantissa; the master weights are fp32).
  ASSERT_EQ(mixed.losses.size(), reference.losses.size());
  for (size_t s = 0; s < mixed.losses.size(); ++s) {
    EXPECT_NEAR(mixed.losses[s], reference.losses[s], 0.05 * reference.losses[s]) << "step " << s;
  }
  EXPECT_LT(mixed.losses.back(), 0.7 * mixed.losses.front()) << "the model must train";
  EXPECT_NE(mixed.losses.back(), reference.losses.back()) << "the dtype must matter";
}

INSTANTIATE_TEST_SUITE_P(Engine, MixedPrecision,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(1, 4, 8)),
                         [](const auto& info) {
                           return std::string(Name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// One rank's gradient overflows in one step: every rank skips that step at
// every stage alike, and with hysteresis 1 the scale halves.
TEST(LossScaling, AnOverflowOnOneRankSkipsTheStepOnAll) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run = MixedRun(DType::kF16, 4);
  run.config.loss_scaler.hysteresis = 1;
  run.edit_grad = [](int rank, int step, int param, std::span<float> grad) {
    if (rank == 2 && step == 3 && param == 1) grad[0] = INFINITY;
  };
  const RankResult r = TrainAllStagesAlike(*model, run);
  if (::testing::Test::HasFailure()) return;
  EXPECT_EQ(r.stats.skipped_steps, 1);
  EXPECT_EQ(r.stats.loss_scale, 32768.0);
}

// A scale far too large overflows fp16 at once: the steps are skipped and
// the scale backs off until the gradients fit, then training proceeds.
TEST(LossScaling, BacksOffUntilGradientsFit) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run = MixedRun(DType::kF16, 4);
  run.steps = 16;
  run.config.loss_scaler.initial_scale = 0x1p26;
  run.config.loss_scaler.hysteresis = 1;
  const RankResult r = TrainAllStagesAlike(*model, run);
  if (::testing::Test::HasFailure()) return;
  EXPECT_GT(r.stats.skipped_steps, 3);
  EXPECT_LT(r.stats.loss_scale, 0x1p26);
  EXPECT_GT(r.stats.steps, 4);
  EXPECT_LT(r.losses.back(), r.losses.front());
}

// Reducing a few elements at a time changes the collectives, not the sums.
TEST(MixedPrecisionChunks, SmallChunksGiveTheSameBits) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  for (int stage : {0, 2, 3}) {
    TrainingRun run = MixedRun(DType::kBF16, 4);
    run.steps = 4;
    run.config.stage = stage;
    const std::vector<RankResult> whole = TrainWithEngine(*model, run, AdamW());
    run.config.reduce_chunk_elements = 100;  // not a multiple of anything
    const std::vector<RankResult> chunked = TrainWithEngine(*model, run, AdamW());
    for (int r = 0; r < run.world; ++r) {
      ASSERT_TRUE(whole[r].status.ok()) << whole[r].status;
      ASSERT_TRUE(chunked[r].status.ok()) << chunked[r].status;
      ExpectBitIdentical(whole[r].params, chunked[r].params, "stage " + std::to_string(stage));
      EXPECT_GT(chunked[r].stats.comm.Total().calls, whole[r].stats.comm.Total().calls);
    }
  }
}

TEST(LossScaling, Bf16NeedsNoScale) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run = MixedRun(DType::kBF16, 2);
  run.steps = 2;
  const RankResult r = TrainWithEngine(*model, run, AdamW())[0];
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.stats.loss_scale, 1.0);
}

}  // namespace
}  // namespace zero::testing_model
