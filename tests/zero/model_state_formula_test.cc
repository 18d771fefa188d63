// The ZeRO paper's model-state formula (zero/model_state_formula.h): the
// paper's Table 1, offload and NVMe as the footprint experiment prints them,
// and the cases of python/zero/_memory.py's model_state_formula (expected
// bytes computed by that function).
#include "zero/model_state_formula.h"

#include <string>

#include "gtest/gtest.h"

namespace zero {
namespace {

// Table 1 of the ZeRO paper: Ψ = 7.5B, N = 64, mixed-precision Adam.
TEST(ModelStateFormulaTest, ReproducesTheTableOfThePaper) {
  const double psi = 7.5e9;
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelStateBytes s = ModelStateFormula({.psi = psi, .ranks = 64, .stage = stage});
    EXPECT_DOUBLE_EQ(s.device(), expected[stage]) << "stage " << stage;
    EXPECT_EQ(s.host, 0);
    EXPECT_EQ(s.nvme, 0);
  }
}

TEST(ModelStateFormulaTest, SplitsTheDeviceBytesByState) {
  const ModelStateBytes s = ModelStateFormula({.psi = 800, .ranks = 8, .stage = 2});
  EXPECT_EQ(s.params, 2 * 800);
  EXPECT_EQ(s.grads, 2 * 800 / 8);
  EXPECT_EQ(s.optimizer, 12 * 800 / 8);
}

// ZeRO-Offload: master 4 + moments 8 + fp32 gradients 4 per element on the
// host, also for an fp32 model, whose K (8) counts no master.
TEST(ModelStateFormulaTest, OffloadMovesTheOptimizerSideToTheHost) {
  ModelStateInput in{.psi = 800, .ranks = 8, .stage = 2, .offload_optimizer = true};
  ModelStateBytes s = ModelStateFormula(in);
  EXPECT_EQ(s.params, 2 * 800);
  EXPECT_EQ(s.grads, 0);
  EXPECT_EQ(s.optimizer, 0);
  EXPECT_EQ(s.host, 16 * 800 / 8);
  in.param_bytes = in.grad_bytes = 4;
  in.optimizer_bytes = 8;
  EXPECT_EQ(ModelStateFormula(in).host, 16 * 800 / 8);
  in.stage = 1;  // the whole gradient stays on the device
  EXPECT_EQ(ModelStateFormula(in).grads, 4 * 800);
  in.stage = 0;  // nothing is partitioned
  EXPECT_EQ(ModelStateFormula(in).host, 16 * 800);
}

TEST(ModelStateFormulaTest, ParameterOffloadLeavesNothingOnTheDevice) {
  const ModelStateBytes s = ModelStateFormula(
      {.psi = 800, .ranks = 8, .stage = 3, .offload_optimizer = true, .offload_parameters = true});
  EXPECT_EQ(s.device(), 0);
  EXPECT_EQ(s.host, 18 * 800 / 8);
}

// ZeRO-Infinity: master and moments in the file, the fp32 gradients on the host.
TEST(ModelStateFormulaTest, NvmeTakesMasterAndMomentsFromTheHost) {
  const ModelStateBytes s = ModelStateFormula(
      {.psi = 800, .ranks = 8, .stage = 2, .offload_optimizer = true, .nvme = true});
  EXPECT_EQ(s.nvme, 12 * 800 / 8);
  EXPECT_EQ(s.host, 4 * 800 / 8);
  EXPECT_EQ(s.device(), 2 * 800);
}

struct PythonCase {
  int stage;
  double psi;
  int world;
  double p, g, k;
  std::string offload;  // "none", "optimizer", "parameters"
  int accumulation;
  double bytes;  // model_state_formula(stage, psi, world, p, g, k, offload, accumulation)
};

// What python/zero/_memory.py's model_state_formula returned for these.
const PythonCase kPythonCases[] = {
    {0, 4096, 2, 4, 4, 8, "none", 1, 65536},
    {1, 4096, 2, 4, 4, 8, "none", 1, 49152},
    {1, 4096, 2, 4, 4, 8, "none", 4, 57344},  // accumulating: + g Ψ / N
    {2, 4096, 2, 4, 4, 8, "none", 4, 40960},
    {3, 4096, 2, 4, 4, 8, "none", 1, 32768},
    {0, 1024, 4, 2, 2, 12, "none", 1, 16384},
    {1, 1024, 4, 2, 2, 12, "none", 2, 7680},
    {2, 1024, 4, 2, 2, 12, "none", 1, 5632},
    {3, 1024, 4, 2, 2, 12, "none", 1, 4096},
    {1, 1024, 4, 2, 2, 12, "optimizer", 2, 4096},  // no accumulation term with offload
    {2, 1024, 4, 2, 2, 12, "optimizer", 1, 2048},
    {3, 1024, 4, 2, 2, 12, "optimizer", 1, 512},
    {3, 1024, 4, 2, 2, 12, "parameters", 1, 0},
    {1, 2048, 2, 4, 4, 0, "none", 3, 20480},  // plain SGD, fp32
    {2, 2048, 8, 2, 2, 4, "none", 1, 5632},   // plain SGD, bf16
};

TEST(ModelStateFormulaTest, MatchesThePythonFormula) {
  for (const PythonCase& c : kPythonCases) {
    const ModelStateBytes s = ModelStateFormula({.psi = c.psi,
                                                 .ranks = c.world,
                                                 .stage = c.stage,
                                                 .param_bytes = c.p,
                                                 .grad_bytes = c.g,
                                                 .optimizer_bytes = c.k,
                                                 .offload_optimizer = c.offload != "none",
                                                 .offload_parameters = c.offload == "parameters",
                                                 .accumulation = c.accumulation});
    EXPECT_EQ(s.device(), c.bytes) << "stage " << c.stage << " psi " << c.psi << " world "
                                   << c.world << " offload " << c.offload << " accumulation "
                                   << c.accumulation;
  }
}

}  // namespace
}  // namespace zero
