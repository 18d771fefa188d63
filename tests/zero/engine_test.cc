// Stages 0-3 against the single-process reference, bit for bit in fp32.
#include <cstring>
#include <initializer_list>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "optimizers/sgd.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

std::unique_ptr<Model> TestModel(const std::string& name) {
  if (name == "mlp") return *MakeMlp(16, 32, 8, 8);
  // Sizes off multiples of Layout::kAlign: alignment gaps between parameters.
  if (name == "mlp_odd") return *MakeMlp(13, 27, 5, 8);
  return *MakeTransformer(2, 16, 2, 8, 2);
}

OptimizerFactory SgdMomentum(bool nesterov) {
  return [nesterov] {
    SgdConfig config;
    config.lr = 0.05;
    config.momentum = 0.9;
    config.nesterov = nesterov;
    return MakeSgd(config);
  };
}

// Trains under the engine and alone; every rank must hold the reference's
// parameters exactly, and they must have moved (the model really trained).
void ExpectEngineMatchesReference(const Model& model, const TrainingRun& run,
                                  const OptimizerFactory& optimizer) {
  absl::StatusOr<ParamSet> expected = TrainReference(model, run, optimizer);
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<RankResult> ranks = TrainWithEngine(model, run, optimizer);
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(ranks[r].status.ok()) << "rank " << r << ": " << ranks[r].status;
    ExpectBitIdentical(*expected, ranks[r].params, "rank " + std::to_string(r));
  }
  absl::StatusOr<ParamSet> initial = InitialParams(model, run.seed);
  EXPECT_NE(std::memcmp((*initial)[0].data(), ranks[0].params[0].data(), 4 * (*initial)[0].size()),
            0);
}

// model, stage, ranks, micro-batches per step, bucket elements
using Case = std::tuple<std::string, int, int, int, size_t>;

class StagesMatchReference : public ::testing::TestWithParam<Case> {};

TEST_P(StagesMatchReference, BitForBit) {
  const auto& [model_name, stage, world, gas, bucket] = GetParam();
  std::unique_ptr<Model> model = TestModel(model_name);
  TrainingRun run;
  run.world = world;
  run.steps = 20;
  run.config.stage = stage;
  run.config.gradient_accumulation_steps = gas;
  run.config.bucket_elements = bucket;
  ExpectEngineMatchesReference(*model, run, AdamW());
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [model, stage, world, gas, bucket] = info.param;
  return model + "_stage" + std::to_string(stage) + "_ranks" + std::to_string(world) +
         "_micro" + std::to_string(gas) + (bucket < 1000 ? "_buckets" : "_onebucket");
}

INSTANTIATE_TEST_SUITE_P(
    Engine, StagesMatchReference,
    ::testing::Combine(::testing::Values("mlp", "transformer"), ::testing::Values(0, 1, 2, 3),
                       ::testing::Values(1, 2, 4, 8), ::testing::Values(1, 3),
                       ::testing::Values(size_t{500'000'000}, size_t{300})),
    CaseName);

// Rank counts that are not powers of two pad units to N * 16 all the same.
INSTANTIATE_TEST_SUITE_P(
    OddRanks, StagesMatchReference,
    ::testing::Combine(::testing::Values("transformer"), ::testing::Values(0, 1, 2, 3),
                       ::testing::Values(3, 6), ::testing::Values(1),
                       ::testing::Values(size_t{300})),
    CaseName);

// Ranks on several nodes, hierarchical collectives: every stage matches the
// reference that sums in the same two-level order, on the engine's streams.
class HierarchicalMatchesReference
    : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(HierarchicalMatchesReference, BitForBit) {
  const auto& [stage, world, per_node] = GetParam();
  std::unique_ptr<Model> model = TestModel("transformer");
  TrainingRun run;
  run.world = world;
  run.ranks_per_node = per_node;
  run.steps = 10;
  run.stream_ordered = true;
  run.config.stage = stage;
  run.config.bucket_elements = 300;
  run.config.persistence_threshold = 0;
  ExpectEngineMatchesReference(*model, run, AdamW());
}

INSTANTIATE_TEST_SUITE_P(Engine, HierarchicalMatchesReference,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(4, 8),
                                            ::testing::Values(2)));

// Stage 3 with parameters really gathered on demand: no persistence, with
// and without prefetch, with modules kept for reuse.
struct Stage3Knobs {
  const char* name;
  size_t persistence_threshold, prefetch_elements;
  int max_reuse_distance;
};
constexpr Stage3Knobs kStage3Knobs[] = {
    {"ondemand", 0, 0, 0}, {"prefetch", 0, 100'000, 0}, {"persistent_and_reuse", 200, 5'000, 3}};

class Stage3MatchesReference
    : public ::testing::TestWithParam<std::tuple<Stage3Knobs, int, int>> {};

TEST_P(Stage3MatchesReference, BitForBit) {
  const auto& [knobs, world, gas] = GetParam();
  std::unique_ptr<Model> model = TestModel("transformer");
  TrainingRun run;
  run.world = world;
  run.config.stage = 3;
  run.config.gradient_accumulation_steps = gas;
  run.config.bucket_elements = 400;
  run.config.persistence_threshold = knobs.persistence_threshold;
  run.config.prefetch_elements = knobs.prefetch_elements;
  run.config.max_reuse_distance = knobs.max_reuse_distance;
  ExpectEngineMatchesReference(*model, run, AdamW());
}

std::string Stage3Name(const ::testing::TestParamInfo<std::tuple<Stage3Knobs, int, int>>& info) {
  const auto& [knobs, world, gas] = info.param;
  return std::string(knobs.name) + "_ranks" + std::to_string(world) + "_micro" +
         std::to_string(gas);
}

INSTANTIATE_TEST_SUITE_P(Engine, Stage3MatchesReference,
                         ::testing::Combine(::testing::ValuesIn(kStage3Knobs),
                                            ::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(1, 3)),
                         Stage3Name);

// 4 ranks, a max norm every step exceeds.
TrainingRun ClippedRun(int steps, size_t bucket_elements) {
  TrainingRun run;
  run.world = 4;
  run.steps = steps;
  run.config.bucket_elements = bucket_elements;
  run.config.persistence_threshold = 0;
  run.config.max_grad_norm = 0.05;
  return run;
}

// Trains `run` at each of `stages`: every rank must clip and hold the first
// stage's parameters bit for bit. Returns those (empty after a failure).
ParamSet ExpectStagesClipIdentically(const Model& model, TrainingRun run,
                                     const OptimizerFactory& optimizer,
                                     std::initializer_list<int> stages) {
  ParamSet first;
  for (int stage : stages) {
    run.config.stage = stage;
    for (const RankResult& r : TrainWithEngine(model, run, optimizer)) {
      EXPECT_TRUE(r.status.ok()) << "stage " << stage << ": " << r.status;
      if (!r.status.ok()) return {};
      EXPECT_GT(r.stats.last_grad_norm, run.config.max_grad_norm) << "the test must clip";
      if (first.empty()) first = r.params;
      ExpectBitIdentical(first, r.params, "stage " + std::to_string(stage));
    }
  }
  return first;
}

// Clipping by global norm: the norm's partial sums follow the ownership of
// pieces, which is the same at every stage, so all stages agree bit for bit;
// the reference sums in another order, so it agrees up to rounding.
TEST(EngineClipping, EveryStageClipsIdentically) {
  std::unique_ptr<Model> model = TestModel("transformer");
  TrainingRun run = ClippedRun(10, 300);
  absl::StatusOr<ParamSet> reference = TrainReference(*model, run, AdamW());
  ASSERT_TRUE(reference.ok()) << reference.status();
  const ParamSet stage0 = ExpectStagesClipIdentically(*model, run, AdamW(), {0, 1, 2, 3});
  ASSERT_FALSE(stage0.empty());
  for (size_t i = 0; i < stage0.size(); ++i) {
    for (size_t j = 0; j < stage0[i].size(); ++j) {
      ASSERT_NEAR(stage0[i][j], (*reference)[i][j], 1e-5) << "param " << i << "[" << j << "]";
    }
  }
  run.config.max_grad_norm = 0;
  run.config.stage = 0;
  ParamSet unclipped = TrainWithEngine(*model, run, AdamW())[0].params;
  EXPECT_NE(std::memcmp(unclipped[0].data(), stage0[0].data(), 4 * stage0[0].size()), 0);
}

// Parameters that leave alignment gaps, gradients staged in reused buffers
// (stages 2-3, three micro-batches) or in place in the zeroed model states
// (stage 1): the gaps must hold zeros, or they would enter the norm and the
// stages would disagree. SGD, whose step follows the clip coefficient.
TEST(EngineClipping, AlignmentGapsStayOutOfTheNorm) {
  std::unique_ptr<Model> model = TestModel("mlp_odd");
  TrainingRun run = ClippedRun(6, 200);
  run.config.gradient_accumulation_steps = 3;
  EXPECT_FALSE(
      ExpectStagesClipIdentically(*model, run, SgdMomentum(/*nesterov=*/false), {1, 2, 3})
          .empty());
}

TEST(EngineOptimizers, SgdWithNesterovMatchesToo) {
  std::unique_ptr<Model> model = TestModel("mlp");
  const OptimizerFactory sgd = SgdMomentum(/*nesterov=*/true);
  TrainingRun run;
  run.world = 4;
  run.config.stage = 2;
  run.config.bucket_elements = 200;
  ExpectEngineMatchesReference(*model, run, sgd);
}

}  // namespace
}  // namespace zero::testing_model
