// ZeRO-Offload: master weights, optimizer state and owned gradients in
// pinned host memory, the step on the CPU. A model whose states do not fit
// the devices trains anyway, bit for bit as it does on roomy devices.
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

constexpr size_t kSmallDevice = size_t{2} << 20;  // one 2 MiB granule

// About 310,000 parameters in 28 modules, none over 16,448 elements:
// 1.2 MB of fp32 parameters, 5 MB with Adam's state and gradients.
std::unique_ptr<Model> WideModel() { return *MakeTransformer(6, 64, 2, 8, 2); }

TrainingRun SmallDeviceRun(int stage, Offload offload) {
  return OffloadRun(stage, offload, kSmallDevice);
}

// Without offload the states need more than the device has.
TEST(Offload, TheModelDoesNotFitWithoutIt) {
  std::unique_ptr<Model> model = WideModel();
  for (int stage : {2, 3}) {
    std::vector<RankResult> ranks =
        TrainWithEngine(*model, SmallDeviceRun(stage, Offload::kNone), AdamW());
    EXPECT_EQ(ranks[0].status.code(), absl::StatusCode::kResourceExhausted)
        << "stage " << stage << ": " << ranks[0].status;
  }
}

// stage, offload, overlap, micro-batches
using Case = std::tuple<int, Offload, bool, int>;

class OffloadMatchesReference : public ::testing::TestWithParam<Case> {};

TEST_P(OffloadMatchesReference, BitForBitOnDevicesTooSmallWithoutIt) {
  const auto [stage, offload, overlap, gas] = GetParam();
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = SmallDeviceRun(stage, offload);
  run.config.offload_overlap = overlap;
  run.config.gradient_accumulation_steps = gas;
  absl::StatusOr<ParamSet> expected = TrainReference(*model, run, AdamW());
  ASSERT_TRUE(expected.ok()) << expected.status();
  // The units the engine packs the model into (the same rule at every rank).
  absl::StatusOr<Layout> layout =
      Layout::Create(SpecsOf(*model), run.world, run.config.bucket_elements, stage == 3);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const int64_t units = static_cast<int64_t>(layout->units().size());
  ASSERT_GT(units, 1);
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(ranks[r].status.ok()) << "rank " << r << ": " << ranks[r].status;
    ExpectBitIdentical(*expected, ranks[r].params, "rank " + std::to_string(r));
    // The states are on the host; the device held what fits.
    EXPECT_LE(ranks[r].stats.pool.peak_reserved, kSmallDevice);
    // Master weights and Adam's two moments of this rank's half, at least.
    EXPECT_GE(ranks[r].stats.peak_host_bytes, 3 * 4 * 300'000 / run.world);
    EXPECT_EQ(ranks[r].stats.pool.tag(Tag::kOptimizerState).peak, 0u);
    if (offload == Offload::kParameters) {
      EXPECT_EQ(ranks[r].stats.pool.tag(Tag::kParameters).peak, 0u);
    }
    // With overlap every unit is stepped during backward of each step's last
    // micro-batch (once per step, whatever the accumulation); none without.
    EXPECT_EQ(ranks[r].stats.early_unit_updates, overlap ? units * run.steps : 0)
        << "rank " << r << ", " << units << " units";
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto [stage, offload, overlap, gas] = info.param;
  return "stage" + std::to_string(stage) +
         (offload == Offload::kParameters ? "_params" : "_optimizer") +
         (overlap ? "_overlap" : "_after") + "_gas" + std::to_string(gas);
}

INSTANTIATE_TEST_SUITE_P(
    Engine, OffloadMatchesReference,
    ::testing::Values(Case{2, Offload::kOptimizer, true, 1}, Case{2, Offload::kOptimizer, false, 1},
                      Case{2, Offload::kOptimizer, true, 2}, Case{3, Offload::kOptimizer, true, 1},
                      Case{3, Offload::kParameters, true, 1},
                      Case{3, Offload::kParameters, false, 2}),
    CaseName);

// Mixed precision offloads the same way: equal to bf16 on the device.
TEST(Offload, Bf16EqualsTheDevice) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = SmallDeviceRun(3, Offload::kParameters);
  run.config.param_dtype = DType::kBF16;
  std::vector<RankResult> offloaded = TrainWithEngine(*model, run, AdamW());
  run.config.offload = Offload::kNone;
  run.capacity = size_t{64} << 20;
  std::vector<RankResult> device = TrainWithEngine(*model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(offloaded[r].status.ok()) << offloaded[r].status;
    ASSERT_TRUE(device[r].status.ok()) << device[r].status;
    ExpectBitIdentical(device[r].params, offloaded[r].params, "rank " + std::to_string(r));
  }
}

TEST(Offload, BadConfigurations) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = SmallDeviceRun(0, Offload::kOptimizer);
  run.steps = 1;
  EXPECT_EQ(TrainWithEngine(*model, run, AdamW())[0].status.code(),
            absl::StatusCode::kInvalidArgument);
  run = SmallDeviceRun(2, Offload::kParameters);
  EXPECT_EQ(TrainWithEngine(*model, run, AdamW())[0].status.code(),
            absl::StatusCode::kInvalidArgument);
  // A host budget below the states: a clear error, not a crash.
  run = SmallDeviceRun(2, Offload::kOptimizer);
  run.config.host_capacity = 4096;
  const absl::Status s = TrainWithEngine(*model, run, AdamW())[0].status;
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

}  // namespace
}  // namespace zero::testing_model
