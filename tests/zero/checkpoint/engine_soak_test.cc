// The engine over a long run: 4 host ranks train a small fp16 model at
// stage 3, saving a checkpoint every `every` steps, with gradient overflows
// injected at seeded random steps (the loss scaler backs off and those
// steps are skipped); a fresh cluster restarted from a random one of those
// checkpoints ends with exactly the parameters and model states of the
// uninterrupted run.
// Knobs: ZERO_SOAK_STEPS (default 60; bench/soak.sh: 2000),
// ZERO_SOAK_CHECKPOINT_EVERY (default 20; bench/soak.sh: 100), ZERO_SOAK_SEED.
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>

#include "gtest/gtest.h"
#include "tests/zero/checkpoint/cluster.h"
#include "tests/zero/checkpoint/expect.h"
#include "tests/zero/test_util.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"

namespace zero::testing_model {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

TEST(EngineSoak, RestartFromARandomCheckpointEqualsTheUninterruptedRun) {
  const int steps = EnvInt("ZERO_SOAK_STEPS", 60);
  const int every = EnvInt("ZERO_SOAK_CHECKPOINT_EVERY", 20);
  ASSERT_GE(steps, 2 * every) << "need two checkpoints at least";
  std::mt19937_64 rng(EnvInt("ZERO_SOAK_SEED", 14));
  std::set<int> overflows;  // about one step in twenty
  for (int s = 0; s < steps; ++s)
    if (rng() % 20 == 0) overflows.insert(s);
  overflows.insert(static_cast<int>(rng() % every));  // at least one before the first save

  std::unique_ptr<Model> model = *MakeMlp(8, 24, 4, 4);
  TrainingRun run = SmallRun(4, 3);
  run.config.param_dtype = DType::kF16;
  run.config.loss_scaler.hysteresis = 1;  // every overflow halves the scale
  run.config.bucket_elements = 64;
  run.edit_grad = [&overflows](int rank, int step, int param, std::span<float> grad) {
    if (overflows.count(step) && rank == step % 4 && param == 0) grad[0] = INFINITY;
  };

  // The uninterrupted run, saving as it goes.
  const std::string root = FreshDir("soak");
  auto reference = Cluster::Create(*model, run, AdamW());
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<std::pair<int, std::string>> saved;  // (step, folder)
  for (int s = 0; s < steps; s += every) {
    const int to = std::min(steps, s + every);
    ASSERT_TRUE((*reference)->Train(s, to).ok()) << "steps " << s << "-" << to;
    if (to == steps) break;
    ASSERT_TRUE(AllOk((*reference)->Save(root)).ok()) << "save at " << to;
    absl::StatusOr<std::string> folder = checkpoint::ResolveCheckpoint(root);
    ASSERT_TRUE(folder.ok()) << folder.status();
    saved.emplace_back(to, *folder);
  }
  auto expected_params = (*reference)->Params();
  auto expected_states = (*reference)->States();
  ASSERT_TRUE(expected_params.ok() && expected_states.ok());
  const ResumePoint expected_point = (*reference)->engine(0).owned_state().resume_point();
  ASSERT_TRUE(expected_point.loss_scaler.has_value());
  reference->reset();

  // A restart from one of them.
  const auto& [from, folder] = saved[rng() % saved.size()];
  auto restarted = Cluster::Create(*model, run, AdamW());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  ASSERT_TRUE(AllOk((*restarted)->Load(folder)).ok()) << folder;
  ASSERT_TRUE((*restarted)->Train(from, steps).ok()) << "resumed at " << from;
  auto params = (*restarted)->Params();
  auto states = (*restarted)->States();
  ASSERT_TRUE(params.ok() && states.ok());
  for (int r = 0; r < run.world; ++r) {
    ExpectBitIdentical((*expected_params)[r], (*params)[r],
                       "rank " + std::to_string(r) + " resumed at step " + std::to_string(from));
  }
  for (int r = 0; r < run.world; ++r) {  // the loss scaler resumed where it was, too
    const ResumePoint point = (*restarted)->engine(r).owned_state().resume_point();
    ASSERT_TRUE(point.loss_scaler.has_value());
    EXPECT_EQ(point.steps, expected_point.steps) << "rank " << r;
    EXPECT_EQ(point.loss_scaler->scale, expected_point.loss_scaler->scale) << "rank " << r;
    EXPECT_EQ(point.loss_scaler->good_steps, expected_point.loss_scaler->good_steps);
    EXPECT_EQ(point.loss_scaler->hysteresis_left, expected_point.loss_scaler->hysteresis_left);
  }
  ExpectStatesIdentical(*expected_states, *states,
                        "model states resumed at step " + std::to_string(from));
  std::printf("soak: %d steps, %zu checkpoints, %zu overflows, resumed at step %d\n", steps,
              saved.size(), overflows.size(), from);
}

}  // namespace
}  // namespace zero::testing_model
