// The formulas the experiment prints beside its measurements.
#include "footprint/formulas.h"

#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "footprint/report.h"
#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

double Paper(double psi, int n, int stage, Precision p = Precision::kBF16,
             OptimizerKind o = OptimizerKind::kAdam) {
  return PaperModelStates({.psi = psi, .ranks = n, .stage = stage, .precision = p, .optimizer = o})
      .device();
}

// Table 1 of the ZeRO paper: Ψ = 7.5B, N = 64, K = 12.
TEST(PaperFormulaTest, ReproducesTableOne) {
  const double psi = 7.5e9;
  EXPECT_EQ(FormatGB(Paper(psi, 64, 0)), "120");
  EXPECT_EQ(FormatGB(Paper(psi, 64, 1)), "31.4");
  EXPECT_EQ(FormatGB(Paper(psi, 64, 2)), "16.6");
  EXPECT_EQ(FormatGB(Paper(psi, 64, 3)), "1.88");
  // The rest of the table's N = 64 column... and N = 1024 (stage 3: 0.12 GB).
  EXPECT_DOUBLE_EQ(Paper(psi, 1024, 3), 16 * psi / 1024);
}

TEST(PaperFormulaTest, MixedPrecisionAdamIsSixteenPsi) {
  const double psi = 1e9, n = 8;
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 0), 16 * psi);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 1), 4 * psi + 12 * psi / n);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 2), 2 * psi + 14 * psi / n);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 3), 16 * psi / n);
  // fp16 is the same bytes.
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 2, Precision::kF16), 2 * psi + 14 * psi / n);
}

TEST(PaperFormulaTest, Fp32AdamHasNoMasterCopy) {
  const double psi = 1e9, n = 8;
  const auto fp32 = Precision::kF32;
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 0, fp32), 16 * psi);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 1, fp32), 8 * psi + 8 * psi / n);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 2, fp32), 4 * psi + 12 * psi / n);
  EXPECT_DOUBLE_EQ(Paper(psi, 8, 3, fp32), 16 * psi / n);
}

TEST(PaperFormulaTest, SgdWithMomentumKeepsOneBuffer) {
  const double psi = 1e9, n = 4;
  EXPECT_DOUBLE_EQ(StateBytesPerElement(Precision::kF32, OptimizerKind::kSgd), 4);
  EXPECT_DOUBLE_EQ(StateBytesPerElement(Precision::kBF16, OptimizerKind::kSgd), 8);
  EXPECT_DOUBLE_EQ(Paper(psi, 4, 1, Precision::kF32, OptimizerKind::kSgd), 8 * psi + 4 * psi / n);
  EXPECT_DOUBLE_EQ(Paper(psi, 4, 3, Precision::kBF16, OptimizerKind::kSgd), 12 * psi / n);
}

TEST(PaperFormulaTest, OffloadMovesTheOptimizerSideToTheHost) {
  const double psi = 1e9, n = 8;
  FormulaInput in{.psi = psi, .ranks = 8, .stage = 2, .offload = Offload::kOptimizer};
  StateBytes s = PaperModelStates(in);
  EXPECT_DOUBLE_EQ(s.params, 2 * psi);
  EXPECT_DOUBLE_EQ(s.grads, 0);
  EXPECT_DOUBLE_EQ(s.optimizer, 0);
  EXPECT_DOUBLE_EQ(s.host, 16 * psi / n);  // master 4 + moments 8 + fp32 gradients 4
  in.stage = 3;
  in.offload = Offload::kParameters;
  s = PaperModelStates(in);
  EXPECT_DOUBLE_EQ(s.device(), 0);
  EXPECT_DOUBLE_EQ(s.host, 18 * psi / n);
}

std::string GiB(int64_t bytes) { return absl::StrFormat("%.2f", bytes / double(1 << 30)); }

// DeepSpeed's documentation prints these for t5-small (60,506,624 params,
// largest layer 16,449,536) on 1 node of 1 GPU:
//   1.52GB | 0.06GB | offload_param=cpu,  offload_optimizer=cpu, zero_init=1 (and 0)
//   1.35GB | 0.17GB | offload_param=none, offload_optimizer=cpu, zero_init=1 (and 0)
//   0.09GB | 1.08GB | offload_param=none, offload_optimizer=none, zero_init=1
//   0.34GB | 1.08GB | offload_param=none, offload_optimizer=none, zero_init=0
TEST(DeepSpeedTest, Zero3MatchesItsDocumentedOutput) {
  const double total = 60'506'624, largest = 16'449'536;
  for (bool init : {true, false}) {
    Zero3Estimate both = EstimateZero3(total, largest, 1, 1, true, true, init);
    EXPECT_EQ(GiB(both.cpu), "1.52");
    EXPECT_EQ(GiB(both.gpu), "0.06");
    Zero3Estimate opt = EstimateZero3(total, largest, 1, 1, true, false, init);
    EXPECT_EQ(GiB(opt.cpu), "1.35");
    EXPECT_EQ(GiB(opt.gpu), "0.17");
    Zero3Estimate none = EstimateZero3(total, largest, 1, 1, false, false, init);
    EXPECT_EQ(GiB(none.cpu), init ? "0.09" : "0.34");
    EXPECT_EQ(GiB(none.gpu), "1.08");
  }
  EXPECT_EQ(EstimateZero3(total, largest, 1, 1, false, false).largest_layer_memory, 4 * largest);
}

// ... and for t5-3b (2,851,598,336 params) on 1 node of 8 GPUs:
//   127.48GB |  5.31GB | offload_optimizer=cpu
//   127.48GB | 15.93GB | offload_optimizer=none
TEST(DeepSpeedTest, Zero2MatchesItsDocumentedOutput) {
  const double total = 2'851'598'336;
  Zero2Estimate offload = EstimateZero2(total, 8, 1, true);
  EXPECT_EQ(GiB(offload.cpu), "127.48");
  EXPECT_EQ(GiB(offload.gpu), "5.31");
  Zero2Estimate none = EstimateZero2(total, 8, 1, false);
  EXPECT_EQ(GiB(none.cpu), "127.48");
  EXPECT_EQ(GiB(none.gpu), "15.93");
  // Exact arithmetic: 4Ψ + int(16Ψ / 8).
  EXPECT_EQ(none.gpu, static_cast<int64_t>(4 * total + 2 * total));
}

TEST(DeepSpeedTest, RanksArePlacedOnNodes) {
  const double psi = 1e9;
  FormulaInput in{.psi = psi, .ranks = 64, .stage = 2};
  DeepSpeedFigures f = DeepSpeedEstimate(in, 1e6, 8);  // 8 nodes of 8
  ASSERT_TRUE(f.available);
  EXPECT_DOUBLE_EQ(f.gpu, 4 * psi + std::trunc(16 * psi / 64));
  EXPECT_DOUBLE_EQ(f.cpu_node, psi * 4 * 8 * 1.5);
  EXPECT_DOUBLE_EQ(f.cpu_rank, psi * 4 * 1.5);
  in.ranks = 12;  // not whole nodes of 8: one node of 12, not 2 x 8 = 16 GPUs
  f = DeepSpeedEstimate(in, 1e6, 8);
  EXPECT_DOUBLE_EQ(f.gpu, 4 * psi + std::trunc(16 * psi / 12));
  EXPECT_DOUBLE_EQ(f.cpu_rank, psi * 4 * 1.5);
  in.ranks = 4;  // one node of 4
  in.stage = 3;
  in.offload = Offload::kParameters;
  f = DeepSpeedEstimate(in, 1e6, 8);
  EXPECT_DOUBLE_EQ(f.gpu, 4e6);
  EXPECT_DOUBLE_EQ(f.cpu_node, psi * 18 * 1.5);
  in.stage = 0;
  EXPECT_FALSE(DeepSpeedEstimate(in, 1e6, 8).available);
}

TEST(FormatTest, RoundsAsThePaperDoes) {
  EXPECT_EQ(FormatGB(0), "0");
  EXPECT_EQ(FormatGB(120.0029e9), "120");
  EXPECT_EQ(FormatGB(31.407e9), "31.4");
  EXPECT_EQ(FormatGB(1.87505e9), "1.88");
  EXPECT_EQ(FormatGB(0.1234e9), "0.123");
  EXPECT_EQ(FormatGB(1104.2e9), "1104");
}

}  // namespace
}  // namespace zero::footprint
