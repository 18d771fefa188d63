// bf16 and fp16 training: fp32 master pieces, fp32 reductions, dynamic loss
// scaling. The engine equals, bit for bit, a reference that applies the same
// rounding points by hand; every stage does the same arithmetic, so at one
// precision all stages agree bit for bit; against fp32 the loss agrees
// within a tolerance.
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "base/dtype.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "optimizers/loss_scaler.h"
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

// An independent reference for mixed precision: the test model trained in
// fp32 by one process, with the engine's rounding points applied here, by
// hand: the model computes with its parameters rounded to the model dtype;
// each gradient (times the loss scale) is rounded to that dtype as the model
// hands it over; ranks are summed in fp32 in rank order and the sum rounded
// once; micro-batches accumulate in order, rounded after each add; fp16
// skips a step whose gradients are not finite (and the scale backs off);
// fp32 master weights take the optimizer's step with 1/(ranks x micro-
// batches x loss scale). Conversions are base/dtype.h's (tested there).
float RoundTo(DType dtype, float x) {
  return dtype == DType::kBF16 ? BF16ToFloat(FloatToBF16(x)) : F16ToFloat(FloatToF16(x));
}

ParamSet Rounded(ParamSet values, DType dtype) {
  for (auto& p : values) {
    for (float& x : p) x = RoundTo(dtype, x);
  }
  return values;
}

struct MixedResult {
  ParamSet params;                        // the model-dtype copy, widened
  std::vector<std::vector<float>> losses;  // per rank, per step
  int64_t steps = 0, skipped_steps = 0;
  double loss_scale = 1;
};

// Step `step`'s accumulated gradients (model-dtype values, widened) from
// `model_params`; appends each rank's mean loss to out.losses.
absl::StatusOr<ParamSet> MixedGradients(const Model& model, const TrainingRun& run,
                                        const ParamSet& model_params, int step,
                                        float loss_scale, MixedResult& out) {
  const DType dtype = run.config.param_dtype;
  const int gas = run.config.gradient_accumulation_steps;
  std::vector<double> loss(run.world, 0.0);
  ParamSet total;
  for (int micro = 0; micro < gas; ++micro) {
    ParamSet sum;  // fp32
    for (int rank = 0; rank < run.world; ++rank) {
      ParamSet grads;
      const Batch batch = model.MakeBatch(BatchSeed(run.seed, rank, step, micro));
      ASSIGN_OR_RETURN(float l, ForwardBackwardDense(model, model_params, batch, &grads));
      loss[rank] += l;
      for (int id = 0; id < static_cast<int>(grads.size()); ++id) {
        if (run.edit_grad) run.edit_grad(rank, step, id, grads[id]);
        for (float& g : grads[id]) g = RoundTo(dtype, g * loss_scale);
      }
      AddOrTake(sum, std::move(grads), rank == 0);
    }
    AddOrTake(total, std::move(sum), micro == 0);
    total = Rounded(std::move(total), dtype);
  }
  for (int rank = 0; rank < run.world; ++rank) {
    out.losses[rank].push_back(static_cast<float>(loss[rank] / gas));
  }
  return total;
}

bool AllFinite(const ParamSet& values) {
  for (const auto& p : values) {
    for (float x : p) {
      if (!std::isfinite(x)) return false;
    }
  }
  return true;
}

absl::StatusOr<MixedResult> TrainMixedReference(const Model& model, const TrainingRun& run,
                                                const OptimizerFactory& make_optimizer) {
  const DType dtype = run.config.param_dtype;
  if (dtype == DType::kF32 || run.config.max_grad_norm > 0) {
    return absl::InvalidArgumentError("the reference is for bf16/fp16 without clipping");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, make_optimizer());
  ASSIGN_OR_RETURN(ParamSet master, InitialParams(model, run.seed));
  std::optional<LossScaler> scaler;
  if (dtype == DType::kF16) {
    ASSIGN_OR_RETURN(scaler, LossScaler::Create(run.config.loss_scaler));
  }
  std::vector<ParamSet> state(optimizer->state_buffers());
  for (ParamSet& s : state) {
    for (const auto& p : master) s.emplace_back(p.size(), 0.0f);
  }
  MixedResult out;
  out.losses.resize(run.world);
  out.params = Rounded(master, dtype);
  for (int step = 0; step < run.steps; ++step) {
    const double scale = scaler ? scaler->scale() : 1.0;
    ASSIGN_OR_RETURN(ParamSet grads, MixedGradients(model, run, out.params, step,
                                                    static_cast<float>(scale), out));
    if (scaler && scaler->Update(!AllFinite(grads))) {
      ++out.skipped_steps;
      continue;
    }
    ++out.steps;
    const double terms = double(run.world) * run.config.gradient_accumulation_steps;
    const float grad_scale = static_cast<float>(1.0 / (terms * scale));
    for (size_t i = 0; i < master.size(); ++i) {
      std::vector<std::span<float>> s;
      for (ParamSet& buffer : state) s.emplace_back(buffer[i]);
      RETURN_IF_ERROR(optimizer->Step({.params = master[i], .grads = grads[i].data(),
                                       .grad_dtype = DType::kF32, .state = s,
                                       .step = out.steps, .grad_scale = grad_scale}));
    }
    out.params = Rounded(master, dtype);
  }
  out.loss_scale = scaler ? scaler->scale() : 1.0;
  return out;
}

// Every rank of the engine at stages 0 and 3 against the reference: the
// same parameters and losses to the bit, the same steps and loss scale.
void ExpectMatchesReference(const Model& model, TrainingRun run) {
  absl::StatusOr<MixedResult> expected = TrainMixedReference(model, run, AdamW());
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int stage : {0, 3}) {
    run.config.stage = stage;
    std::vector<RankResult> ranks = TrainWithEngine(model, run, AdamW());
    for (int r = 0; r < run.world; ++r) {
      const std::string who = "stage " + std::to_string(stage) + " rank " + std::to_string(r);
      ASSERT_TRUE(ranks[r].status.ok()) << who << ": " << ranks[r].status;
      ExpectBitIdentical(expected->params, ranks[r].params, who);
      EXPECT_EQ(ranks[r].losses, expected->losses[r]) << who;
      EXPECT_EQ(ranks[r].stats.steps, expected->steps) << who;
      EXPECT_EQ(ranks[r].stats.skipped_steps, expected->skipped_steps) << who;
      EXPECT_EQ(ranks[r].stats.loss_scale, expected->loss_scale) << who;
    }
  }
}

using Case = std::tuple<DType, int>;  // model dtype, ranks

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(Name(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param)) + "ranks";
}

// fp16 on 4 ranks where rank 2's gradient of parameter 1 overflows in step 3;
// with hysteresis 1 the scale halves at once.
TrainingRun OverflowRun() {
  TrainingRun run = MixedRun(DType::kF16, 4);
  run.config.loss_scaler.hysteresis = 1;
  run.edit_grad = [](int rank, int step, int param, std::span<float> grad) {
    if (rank == 2 && step == 3 && param == 1) grad[0] = INFINITY;
  };
  return run;
}

class MixedPrecisionReference : public ::testing::TestWithParam<Case> {};

TEST_P(MixedPrecisionReference, EngineEqualsTheRoundingPointsAppliedByHand) {
  const auto [dtype, world] = GetParam();
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  ExpectMatchesReference(*model, MixedRun(dtype, world));
}

INSTANTIATE_TEST_SUITE_P(Engine, MixedPrecisionReference,
                         ::testing::Combine(::testing::Values(DType::kBF16, DType::kF16),
                                            ::testing::Values(1, 4)),
                         CaseName);

// The skip and the back-off of an overflowing fp16 step, against the same
// reference.
TEST(LossScaling, AnOverflowMatchesTheReference) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  const TrainingRun run = OverflowRun();
  ExpectMatchesReference(*model, run);
}

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
                         CaseName);

// One rank's gradient overflows in one step: every rank skips that step at
// every stage alike, and with hysteresis 1 the scale halves.
TEST(LossScaling, AnOverflowOnOneRankSkipsTheStepOnAll) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  const TrainingRun run = OverflowRun();
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

// At the minimum scale, an overflow is an error on every rank (DeepSpeed's
// raise_error_at_min_scale), not another skipped step.
TEST(LossScaling, AnOverflowAtTheMinimumScaleStopsEveryRank) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run = OverflowRun();
  run.config.loss_scaler.initial_scale = 1.0;
  run.config.loss_scaler.min_scale = 1.0;
  const std::vector<RankResult> results = TrainWithEngine(*model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    EXPECT_EQ(results[r].status.code(), absl::StatusCode::kFailedPrecondition)
        << "rank " << r << ": " << results[r].status;
    EXPECT_NE(results[r].status.message().find("already at its minimum"), std::string::npos)
        << results[r].status;
  }
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
