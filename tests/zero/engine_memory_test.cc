// Measured model-state bytes and communication volume against the ZeRO
// paper's figures, read from the pool's and communicator's own counters.
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "optimizers/adam.h"
#include "tests/zero/training.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing_model {
namespace {

// A model of 1,000,003 parameters in three odd-sized tensors, so padding shows.
class MetaModel {
 public:
  static std::vector<ParamSpec> Specs() {
    return {{"embed", 600'001, 0}, {"proj", 300'001, 1}, {"head", 100'001, 2}};
  }
  static constexpr double kPsi = 1'000'003;
};

struct Measured {
  size_t params, grads, optimizer;
  double sent;  // elements per rank per step
  Layout layout;
};

// Creates every rank's engine on meta devices, runs one step with all
// gradients, and reads rank 0's counters.
Measured Measure(int stage, int world) {
  auto devices = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, world, size_t{64} << 30});
  LocalGroup::Options options;
  options.has_bytes = false;
  auto comms = *LocalGroup::Create(world, options);
  auto adam = *MakeAdamW();
  EngineConfig config;
  config.stage = stage;
  config.bucket_elements = 250'000;
  std::vector<std::unique_ptr<Engine>> engines(world);
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto engine = Engine::Create(config, MetaModel::Specs(), adam.get(), comms[r].get(),
                                   devices.get(), r);
      if (!engine.ok()) { status[r] = engine.status(); return; }
      for (int id = 2; id >= 0 && status[r].ok(); --id) {
        status[r] = (*engine)->AddGrad(id, nullptr, MetaModel::Specs()[id].numel);
      }
      if (status[r].ok()) status[r] = (*engine)->Step();
      engines[r] = *std::move(engine);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
  const EngineStats s = engines[0]->stats();
  return Measured{s.pool.tag(Tag::kParameters).current, s.pool.tag(Tag::kGradients).current,
                  s.pool.tag(Tag::kOptimizerState).current,
                  static_cast<double>(s.comm.Total().elements_sent), engines[0]->layout()};
}

class ModelStates : public ::testing::TestWithParam<std::tuple<int, int>> {};

// fp32 Adam: stage 0 16Ψ, stage 1 8Ψ + 8Ψ/N, stage 2 4Ψ + 12Ψ/N bytes.
TEST_P(ModelStates, MatchTheFormulasUpToPadding) {
  const auto [stage, world] = GetParam();
  const Measured m = Measure(stage, world);
  const double full = 4.0 * m.layout.padded_numel();  // one fp32 copy, padded
  const double shard = full / world;
  EXPECT_EQ(m.params, full);
  EXPECT_EQ(m.grads, stage == 2 ? shard : full);
  EXPECT_EQ(m.optimizer, stage == 0 ? 2 * full : 2 * shard);
  const double psi = MetaModel::kPsi, n = world;
  const double formula = stage == 0 ? 16 * psi : stage == 1 ? 8 * psi + 8 * psi / n
                                                            : 4 * psi + 12 * psi / n;
  const double total = m.params + m.grads + m.optimizer;
  EXPECT_GE(total, formula);
  // Padding: at most world * 16 elements per unit (4 units here).
  EXPECT_LE(total - formula, 16.0 * 4 * world * 16 * 4) << "stage " << stage;
}

// Ring traffic: all-reduce, or reduce-scatter + all-gather, 2(N-1)/N Ψ.
TEST_P(ModelStates, SendAboutTwoPsiPerStep) {
  const auto [stage, world] = GetParam();
  const Measured m = Measure(stage, world);
  const double expected = 2.0 * (world - 1) / world * m.layout.padded_numel();
  EXPECT_DOUBLE_EQ(m.sent, expected);
  if (world == 8) EXPECT_NEAR(m.sent / MetaModel::kPsi, 2.0 * 7 / 8, 0.01);
}

INSTANTIATE_TEST_SUITE_P(Stages, ModelStates,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::Values(1, 2, 4, 8)));

TEST(EngineMemory, StageTwoReleasesUnownedGradientsBucketByBucket) {
  std::unique_ptr<Model> model = *MakeTransformer(2, 16, 2, 8, 2);
  TrainingRun run;
  run.world = 4;
  run.steps = 2;
  run.config.stage = 2;
  run.config.bucket_elements = 500;
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, [] { return MakeAdamW(); });
  ASSERT_TRUE(ranks[0].status.ok()) << ranks[0].status;
  const size_t full = 4 * TotalNumel(*model);
  // Gradients never exceed this rank's pieces; the in-flight buckets are
  // communication buffers, far smaller than the whole gradient.
  EXPECT_LT(ranks[0].peak_gradients, full / 3);
  EXPECT_GT(ranks[0].peak_communication, 0u);
  EXPECT_LT(ranks[0].peak_communication, full / 2);
}

}  // namespace
}  // namespace zero::testing_model
