// --offload_device=nvme: the rank's file holds the master weights and
// moments of its pieces (12 bytes an element with Adam), which leave host
// memory for the state file's staging buffers; ZeRO-Infinity's figure (16 bytes a
// parameter over N, its fp32 gradients included) stands beside it.
#include "footprint/experiment.h"
#include "footprint/presets.h"
#include "footprint/row.h"
#include "gtest/gtest.h"
#include "offload/state_file.h"

namespace zero::footprint {
namespace {

Row Measure(const ModelSpec& model, int ranks, int stage, const Knobs& knobs) {
  const Experiment e{&model, ranks, stage, Precision::kBF16, OptimizerKind::kAdam,
                     Offload::kOptimizer};
  absl::StatusOr<Measurement> m = RunExperiment(e, knobs);
  EXPECT_TRUE(m.ok()) << m.status();
  return MakeRow(e, m.value_or(Measurement{}), knobs);
}

class Nvme : public ::testing::TestWithParam<int> {};

TEST_P(Nvme, TheFileHoldsMasterAndMomentsAndHostKeepsTheStaging) {
  const int stage = GetParam(), ranks = 8;
  const ModelSpec model = *Preset("gpt2-small");
  Knobs cpu, nvme;
  nvme.offload_device = OffloadDevice::kNvme;
  const Row on_host = Measure(model, ranks, stage, cpu);
  const Row on_nvme = Measure(model, ranks, stage, nvme);
  const Measurement& m = on_nvme.measured;
  const double shard = static_cast<double>(m.padded_numel) / ranks;
  EXPECT_EQ(m.nvme, 12 * shard) << "fp32 master + Adam's two moments of the piece";
  EXPECT_EQ(on_host.measured.nvme, 0u);
  EXPECT_NEAR(m.nvme, on_nvme.paper.nvme, 12 * (m.padded_numel - m.numel) / ranks + 1.0);
  // The state file's staging buffers of three planes of the default chunk.
  const double staging =
      StateFile::kStagingBuffers * 3.0 * 4 * EngineConfig{}.nvme_chunk_elements;
  EXPECT_EQ(static_cast<double>(m.peak_host), on_host.measured.peak_host - m.nvme + staging);
  EXPECT_EQ(on_nvme.deepspeed.nvme_rank, 16.0 * m.numel / ranks);
  EXPECT_EQ(on_host.deepspeed.nvme_rank, 0.0);
  EXPECT_NE(on_nvme.Label().find("device=nvme"), std::string::npos) << on_nvme.Label();
  // The device holds what it held with the state on the host.
  EXPECT_EQ(m.peak_allocated, on_host.measured.peak_allocated);
}

INSTANTIATE_TEST_SUITE_P(Stages, Nvme, ::testing::Values(1, 2, 3));

TEST(NvmeTest, WithoutOffloadTheDeviceChoiceChangesNothing) {
  const ModelSpec model = *Preset("gpt2-small");
  Knobs nvme;
  nvme.offload_device = OffloadDevice::kNvme;
  const Experiment e{&model, 8, 2, Precision::kBF16, OptimizerKind::kAdam, Offload::kNone};
  absl::StatusOr<Measurement> m = RunExperiment(e, nvme);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->nvme, 0u);
  EXPECT_EQ(MakeRow(e, *m, nvme).paper.nvme, 0.0);
}

}  // namespace
}  // namespace zero::footprint
