// What the experiment measures on the real engine, in fp32 (mixed precision
// is paper_table1_test): each tag's bytes are the formula's over the padded
// elements, traffic is the ring model's 2Ψ (stages 0-2) or 3Ψ (stage 3), and
// a 70B model on 1024 ranks runs in a moment.
#include <chrono>
#include <tuple>

#include "footprint/experiment.h"
#include "footprint/presets.h"
#include "footprint/row.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

Row Measure(const ModelSpec& model, int ranks, int stage, OptimizerKind optimizer,
            const Knobs& knobs = {}) {
  const Experiment e{&model, ranks, stage, Precision::kF32, optimizer, Offload::kNone};
  absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
  EXPECT_TRUE(m.ok()) << m.status();
  return MakeRow(e, m.value_or(Measurement{}), knobs);
}

class Fp32 : public ::testing::TestWithParam<std::tuple<int, int, OptimizerKind>> {};

// fp32 Adam: 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N; SGD with momentum: K = 4.
TEST_P(Fp32, EachTagIsTheFormulaOverThePaddedElements) {
  const auto [stage, ranks, optimizer] = GetParam();
  const ModelSpec model = *Preset("gpt2-small");
  const Row row = Measure(model, ranks, stage, optimizer);
  const Measurement& m = row.measured;
  ASSERT_EQ(m.numel, 124'439'808u);
  ASSERT_EQ(m.padded_numel % (16 * ranks), 0u);
  const double full = 4.0 * m.padded_numel, shard = full / ranks;
  const int k = optimizer == OptimizerKind::kAdam ? 2 : 1;
  EXPECT_EQ(m.params, stage == 3 ? shard : full);
  EXPECT_EQ(m.grads, stage >= 2 ? shard : full);
  EXPECT_EQ(m.optimizer, k * (stage == 0 ? full : shard));
  // Measured = the paper's formula at Ψ + the same formula over the padding.
  EXPECT_NEAR(row.states(), row.paper.device() + row.padding, 1.0);
  EXPECT_GE(row.states(), row.paper.device());
  EXPECT_GE(m.peak_allocated, static_cast<size_t>(row.states()));
  EXPECT_EQ(m.peak_host, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, Fp32,
    ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(1, 8, 64),
                       ::testing::Values(OptimizerKind::kAdam, OptimizerKind::kSgd)));

TEST(MeasuredTest, TrafficIsTwoPsiThenThreeAtStageThree) {
  const ModelSpec model = *Preset("llama2-7b");  // untied: each module used once
  Knobs knobs;
  knobs.persistence_threshold = 0;  // every unit gathered on demand
  for (int stage = 0; stage <= 3; ++stage) {
    const Row row = Measure(model, 8, stage, OptimizerKind::kAdam, knobs);
    const OpStats& sent = row.measured.sent_per_step;
    const double factor = stage == 3 ? 3.0 : 2.0;
    EXPECT_DOUBLE_EQ(sent.elements_sent, factor * 7 / 8 * row.measured.padded_numel) << stage;
    EXPECT_EQ(sent.bytes_sent, 4 * sent.elements_sent);
  }
}

TEST(MeasuredTest, StageThreeGathersWithinTheLiveBudget) {
  const ModelSpec model = *Preset("llama2-7b");
  Knobs knobs;
  knobs.prefetch_elements = 1'000'000'000;  // prefetch as far as the budget allows
  knobs.max_live_elements = 300'000'000;
  const Row row = Measure(model, 64, 3, OptimizerKind::kAdam, knobs);
  // Gathered parameters (fp32 here) stay within the budget but use it.
  EXPECT_LE(row.measured.gathered, 4.0 * knobs.max_live_elements);
  EXPECT_GT(row.measured.gathered, 4.0 * model.largest_module_numel());
  // Below stage 3 nothing is gathered.
  EXPECT_EQ(Measure(model, 64, 2, OptimizerKind::kAdam, knobs).measured.gathered, 0u);
}

TEST(MeasuredTest, SeventyBillionOnAThousandRanksIsQuick) {
  const ModelSpec model = *Preset("llama2-70b");
  const auto start = std::chrono::steady_clock::now();
  const Row row = Measure(model, 1024, 3, OptimizerKind::kAdam);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0);
  EXPECT_EQ(row.psi, 68'976'648'192u);
  EXPECT_NEAR(row.states() / (16.0 * row.psi / 1024), 1.0, 1e-3);
  EXPECT_TRUE(row.fits());
}

// A mixture of experts in 44,843 small modules runs at stage 3 on 1024
// ranks (the prefetch plan costs O(1) per fetch): its states are 16Ψ/N and
// the traffic the ring model's 3Ψ, as for a dense model.
TEST(MeasuredTest, DeepSeekV3OnAThousandRanks) {
  const ModelSpec model = *Preset("deepseek-v3");
  const Row row = Measure(model, 1024, 3, OptimizerKind::kAdam);
  EXPECT_EQ(row.measured.units, 44'843);
  EXPECT_NEAR(row.states() / (16.0 * row.psi / 1024), 1.0, 1e-3);
  EXPECT_NEAR(row.measured.sent_per_step.elements_sent / double(row.psi), 3.0 * 1023 / 1024,
              0.01);
}

}  // namespace
}  // namespace zero::footprint

namespace zero::footprint {
namespace {

// Issue 37's settings on 4 nodes of 8: bytes across nodes per rank shrink
// from the flat ring's mean through hierarchical collectives to hpZ with
// int8 weights and int4 gradients; the bytes inside and across add up to
// what a flat ring sends.
TEST(MeasuredTest, BytesAcrossNodesFollowTheTopologySettings) {
  const ModelSpec model = *Preset("gpt2-small");
  const Experiment e{&model, 32, 3, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone};
  auto across = [&](Knobs knobs) {
    knobs.gpus_per_node = 8;
    absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : Measurement{};
  };
  Knobs flat_knobs;
  flat_knobs.hierarchical = false;
  const Measurement flat = across(flat_knobs);
  EXPECT_EQ(flat.inside_per_step + flat.across_per_step, flat.sent_per_step.bytes_sent);
  const Measurement hier = across({});
  // 4 nodes of 8: (M - 1) / (N - 1) * G = 3 / 31 * 8 of the flat mean, up
  // to the persistent units' collectives.
  EXPECT_NEAR(double(hier.across_per_step) / double(flat.across_per_step), 24.0 / 31, 0.03);
  Knobs all;
  all.hpz = true;
  all.quantized_weights_bits = 8;
  all.quantized_gradients_bits = 4;
  const Measurement zeropp = across(all);
  EXPECT_LT(zeropp.across_per_step * 5, hier.across_per_step);
  EXPECT_GT(zeropp.across_per_step, 0u);
}

// With every module used once (llama2-7b is untied), the bytes across are
// ZeRO++'s accounting (AcrossBytesPerStep) to within the persistent units.
TEST(MeasuredTest, BytesAcrossAreTheFormula) {
  const ModelSpec model = *Preset("llama2-7b");
  const Experiment e{&model, 32, 3, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone};
  Knobs flat, hier, all;
  flat.hierarchical = false;
  all.hpz = true;
  all.quantized_weights_bits = 8;
  all.quantized_gradients_bits = 4;
  for (Knobs knobs : {flat, hier, all}) {
    knobs.gpus_per_node = 8;
    absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
    ASSERT_TRUE(m.ok()) << m.status();
    const Row row = MakeRow(e, *m, knobs);
    ASSERT_GT(row.across_formula, 0);
    EXPECT_NEAR(m->across_per_step / row.across_formula, 1.0, 1e-3)
        << "hierarchical " << knobs.hierarchical << " hpz " << knobs.hpz;
  }
}

}  // namespace
}  // namespace zero::footprint
