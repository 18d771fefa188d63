// Table 1 of the ZeRO paper (arXiv 1910.02054) from MEASURED bytes: the
// model states of one rank of a 7.5B-parameter model on N = 64 ranks with
// mixed-precision Adam (bf16 parameters and gradients; fp32 master weights,
// exp_avg and exp_avg_sq: K = 12) are 120, 31.4, 16.6 and 1.88 GB at
// stages 0-3, rounded as the paper rounds (three significant digits).
//
// It needs mixed precision in the engine (EngineConfig::param_dtype bf16):
// until that lands, Engine::Create returns Unimplemented and this fails.
#include <string>

#include "footprint/experiment.h"
#include "footprint/presets.h"
#include "footprint/report.h"
#include "footprint/row.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

class PaperTable1 : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(PaperTable1, SevenAndAHalfBillionOnSixtyFourRanks) {
  const auto [stage, expected] = GetParam();
  const ModelSpec model = *Preset("zero-7.5b");
  const Experiment e{&model, 64, stage, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone};
  const Knobs knobs;
  absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
  ASSERT_TRUE(m.ok()) << "the engine refused bf16 (mixed precision not landed?): " << m.status();
  const Row row = MakeRow(e, *m, knobs);
  EXPECT_EQ(FormatGB(row.states()), expected)
      << "params " << m->params << " grads " << m->grads << " optimizer " << m->optimizer;
  // And per tag, the paper's split (2Ψ parameters, 2Ψ gradients, 12Ψ
  // optimizer state, each whole or /N), up to padding.
  EXPECT_NEAR(m->params, row.paper.params, 1e-4 * row.paper.params);
  EXPECT_NEAR(m->grads, row.paper.grads, 1e-4 * row.paper.grads);
  EXPECT_NEAR(m->optimizer, row.paper.optimizer, 1e-4 * row.paper.optimizer);
}

INSTANTIATE_TEST_SUITE_P(Stages, PaperTable1,
                         ::testing::Values(std::tuple{0, "120"}, std::tuple{1, "31.4"},
                                           std::tuple{2, "16.6"}, std::tuple{3, "1.88"}));

}  // namespace
}  // namespace zero::footprint
