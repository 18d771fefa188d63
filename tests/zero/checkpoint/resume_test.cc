// Resuming from a checkpoint: at the same world size training continues bit
// for bit as if never interrupted, at every stage; into another world size
// the model states arrive bit for bit and training continues exactly as a
// run of that many ranks started from those states would. A failed save
// leaves the previous checkpoint loadable.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "optimizers/adam.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/checkpoint.h"

namespace zero::testing_model {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 3;  // before and after the checkpoint

std::unique_ptr<Cluster> MakeCluster(const Model& model, const TrainingRun& run,
                                     const OptimizerFactory& optimizer = AdamW()) {
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Create(model, run, optimizer);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// A fresh cluster trained for `steps` and saved to `dir`; *saved gets the
// model states it saved. Null (after a failure) when anything fails.
std::unique_ptr<Cluster> TrainAndSave(const Model& model, const TrainingRun& run, int steps,
                                      const std::string& dir, ModelStates* saved,
                                      const checkpoint::SaveOptions& options = {}) {
  std::unique_ptr<Cluster> cluster = MakeCluster(model, run);
  if (!cluster) return nullptr;
  absl::Status s = cluster->Train(0, steps);
  if (s.ok()) s = AllOk(cluster->Save(dir, options));
  absl::StatusOr<ModelStates> states = s.ok() ? cluster->States() : s;
  EXPECT_TRUE(states.ok()) << states.status();
  if (!states.ok()) return nullptr;
  *saved = *std::move(states);
  return cluster;
}

// A fresh cluster that loaded `path`; *states gets its model states.
std::unique_ptr<Cluster> LoadFresh(const Model& model, const TrainingRun& run,
                                   const std::string& path, ModelStates* states) {
  std::unique_ptr<Cluster> cluster = MakeCluster(model, run);
  if (!cluster) return nullptr;
  absl::Status s = AllOk(cluster->Load(path));
  absl::StatusOr<ModelStates> got = s.ok() ? cluster->States() : s;
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return nullptr;
  *states = *std::move(got);
  return cluster;
}

// (a) Train k steps, save, train k more == 2k uninterrupted, whether the
// same engines go on or fresh ones load the checkpoint; at every stage in
// fp32, and in bf16 and fp16 (fp32 masters either way; fp16 also resumes
// its loss-scaler state, which moves within the test).
struct ResumeCase {
  int stage;
  DType dtype;
};

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, EqualsUninterruptedTraining) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(4, GetParam().stage);
  run.config.param_dtype = GetParam().dtype;
  run.config.loss_scaler.initial_scale = 1024;
  run.config.loss_scaler.growth_interval = 2;
  const std::string dir = FreshDir("resume");
  std::unique_ptr<Cluster> saver = MakeCluster(*model, run);
  std::unique_ptr<Cluster> uninterrupted = MakeCluster(*model, run);
  std::unique_ptr<Cluster> resumed = MakeCluster(*model, run);
  ASSERT_TRUE(saver && uninterrupted && resumed);
  ASSERT_TRUE(saver->Train(0, kSteps).ok());
  ASSERT_TRUE(AllOk(saver->Save(dir)).ok());
  const double scale_at_save = saver->engine(0).loss_scale();
  ASSERT_TRUE(saver->Train(kSteps, 2 * kSteps).ok());
  ASSERT_TRUE(uninterrupted->Train(0, 2 * kSteps).ok());
  ASSERT_TRUE(AllOk(resumed->Load(dir)).ok());
  EXPECT_EQ(resumed->engine(0).owned_state().resume_point().steps, kSteps);
  EXPECT_EQ(resumed->engine(0).loss_scale(), scale_at_save);
  ASSERT_TRUE(resumed->Train(kSteps, 2 * kSteps).ok());

  absl::StatusOr<std::vector<ParamSet>> expected = uninterrupted->Params();
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectParamsOnEveryRank((*expected)[0], *saver, "saved and went on");
  ExpectParamsOnEveryRank((*expected)[0], *resumed, "resumed");
  absl::StatusOr<ModelStates> want = uninterrupted->States(), got = resumed->States();
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectStatesIdentical(*want, *got, "resumed");
}

// Optimizer state on NVMe (offload_device nvme): Save reads it from the
// state file and Load writes it there (owned_state_io's streamed path);
// resumed training equals the uninterrupted run with the state in memory.
TEST(CheckpointNvme, StateOnNvmeSavesAndResumes) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(4, 2);
  run.config.offload = Offload::kOptimizer;
  const std::string dir = FreshDir("nvme_resume");
  std::unique_ptr<Cluster> uninterrupted = MakeCluster(*model, run);
  TrainingRun on_nvme = run;
  on_nvme.config.offload_device = OffloadDevice::kNvme;
  on_nvme.config.nvme_path = FreshDir("nvme_saver");
  std::unique_ptr<Cluster> saver = MakeCluster(*model, on_nvme);
  on_nvme.config.nvme_path = FreshDir("nvme_resumed");
  std::unique_ptr<Cluster> resumed = MakeCluster(*model, on_nvme);
  ASSERT_TRUE(saver && uninterrupted && resumed);
  ASSERT_TRUE(saver->Train(0, kSteps).ok());
  ASSERT_TRUE(AllOk(saver->Save(dir)).ok());
  ASSERT_TRUE(uninterrupted->Train(0, 2 * kSteps).ok());
  ASSERT_TRUE(AllOk(resumed->Load(dir)).ok());
  ASSERT_TRUE(resumed->Train(kSteps, 2 * kSteps).ok());
  absl::StatusOr<std::vector<ParamSet>> expected = uninterrupted->Params();
  ASSERT_TRUE(expected.ok()) << expected.status();
  ExpectParamsOnEveryRank((*expected)[0], *resumed, "resumed from NVMe state");
  absl::StatusOr<ModelStates> want = uninterrupted->States(), got = resumed->States();
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectStatesIdentical(*want, *got, "resumed from NVMe state");
}

// Bytes of the state file chunks (of `chunk` elements, all planes) that
// hold a parameter element of `rank`'s pieces: what one pass of a save reads.
uint64_t ChunksWithParameters(const Layout& layout, int rank, size_t chunk, int planes) {
  uint64_t bytes = 0;
  for (const Unit& u : layout.units()) {
    const size_t piece = u.offset + rank * u.shard;
    for (size_t first = 0; first < u.shard; first += chunk) {
      const size_t lo = piece + first, hi = piece + std::min(u.shard, first + chunk);
      for (int p = u.first_param; p < u.end_param; ++p) {
        const ParamSlot& slot = layout.params()[p];
        if (slot.offset < hi && slot.offset + slot.numel > lo) {
          bytes += planes * (hi - lo) * sizeof(float);
          break;
        }
      }
    }
  }
  return bytes;
}

// Every element of the rank's pieces, padding included, in every plane.
absl::Status FillOwnedState(Engine& engine, float value) {
  for (int u = 0; u < static_cast<int>(engine.layout().units().size()); ++u) {
    RETURN_IF_ERROR(engine.owned_state().Stream(
        u, OwnedStateAccess::Access::kWrite, [&](size_t, size_t n, std::span<float* const> planes) {
          for (float* plane : planes) std::fill_n(plane, n, value);
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

// The padding of the rank's pieces reads 0 in every plane, as the engine keeps it.
absl::Status CheckPaddingIsZero(Engine& engine, int rank) {
  const Layout& layout = engine.layout();
  std::vector<bool> parameter(layout.padded_numel());
  for (const ParamSlot& p : layout.params()) {
    std::fill_n(parameter.begin() + p.offset, p.numel, true);
  }
  for (int u = 0; u < static_cast<int>(layout.units().size()); ++u) {
    const size_t piece = layout.units()[u].offset + rank * layout.units()[u].shard;
    RETURN_IF_ERROR(engine.owned_state().Stream(
        u, OwnedStateAccess::Access::kRead, [&](size_t at, size_t n, std::span<float* const> planes) {
          for (size_t i = 0; i < n; ++i) {
            for (size_t p = 0; p < planes.size() && !parameter[piece + at + i]; ++p) {
              if (planes[p][i] != 0.0f) {
                return absl::InternalError(absl::StrFormat("padding element %d of plane %d is %g",
                                                           piece + at + i, p, planes[p][i]));
              }
            }
          }
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

// What a checkpoint costs the state file: a save reads it once, the chunks
// that hold parameters (each plane of each checkpoint chunk used to be a
// pass of its own, reading whole file chunks: 3x and more for Adam); a load
// writes it once, and reads it once for its own pass plus once for
// Restore's rebuild of the parameters from the masters.
TEST(CheckpointNvme, SaveReadsTheStateFileOnceAndLoadWritesItOnce) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(2, 2);
  run.config.offload = Offload::kOptimizer;
  run.config.offload_device = OffloadDevice::kNvme;
  run.config.nvme_path = FreshDir("nvme_passes");
  run.config.nvme_chunk_elements = 100;  // pieces of several file chunks
  std::unique_ptr<Cluster> saver = MakeCluster(*model, run);
  std::unique_ptr<Cluster> loader = MakeCluster(*model, run);
  ASSERT_TRUE(saver && loader);
  ASSERT_TRUE(saver->Train(0, kSteps).ok());
  checkpoint::SaveOptions options;
  options.chunk_elements = 37;  // checkpoint chunks straddle the file's
  const std::string dir = FreshDir("nvme_passes_checkpoint");
  auto traffic = [](Cluster& cluster, auto action) {
    std::vector<EngineStats> before, after;
    for (int r = 0; r < cluster.world(); ++r) before.push_back(cluster.engine(r).stats());
    EXPECT_TRUE(AllOk(action()).ok());
    for (int r = 0; r < cluster.world(); ++r) {
      after.push_back(cluster.engine(r).stats());
      after[r].nvme_bytes_read -= before[r].nvme_bytes_read;
      after[r].nvme_bytes_written -= before[r].nvme_bytes_written;
    }
    return after;
  };
  const auto saved = traffic(*saver, [&] { return saver->Save(dir, options); });
  // Whatever the loader held, padding included, is overwritten.
  auto on_loader = [&](auto fn) { return AllOk(loader->Run([&](int r) { return fn(r); })); };
  ASSERT_TRUE(on_loader([&](int r) { return FillOwnedState(loader->engine(r), NAN); }).ok());
  const auto loaded = traffic(*loader, [&] { return loader->Load(dir); });
  EXPECT_TRUE(on_loader([&](int r) { return CheckPaddingIsZero(loader->engine(r), r); }).ok());
  for (int r = 0; r < run.world; ++r) {
    std::printf("rank %d: state %zu bytes; save read %llu; load read %llu, wrote %llu\n", r,
                saved[r].nvme_bytes, (unsigned long long)saved[r].nvme_bytes_read,
                (unsigned long long)loaded[r].nvme_bytes_read,
                (unsigned long long)loaded[r].nvme_bytes_written);
    // No chunk read twice; a few may still be in staging from the last step.
    const uint64_t one_pass = ChunksWithParameters(saver->engine(r).layout(), r, 100, 3);
    const uint64_t staged = StateFile::kStagingBuffers * 100 * 3 * sizeof(float);
    EXPECT_LE(saved[r].nvme_bytes_read, one_pass) << "rank " << r;
    EXPECT_GE(saved[r].nvme_bytes_read + staged, one_pass) << "rank " << r;
    EXPECT_EQ(saved[r].nvme_bytes_written, 0u) << "rank " << r;
    EXPECT_EQ(loaded[r].nvme_bytes_written, loaded[r].nvme_bytes) << "rank " << r;
    EXPECT_LE(loaded[r].nvme_bytes_read, 2 * loaded[r].nvme_bytes) << "rank " << r;
  }
  absl::StatusOr<ModelStates> want = saver->States(), got = loader->States();
  ASSERT_TRUE(want.ok() && got.ok());
  ExpectStatesIdentical(*want, *got, "loaded from NVMe state");
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, Resume,
                         ::testing::Values(ResumeCase{0, DType::kF32}, ResumeCase{1, DType::kF32},
                                           ResumeCase{2, DType::kF32}, ResumeCase{3, DType::kF32},
                                           ResumeCase{2, DType::kBF16}, ResumeCase{3, DType::kF16}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_" +
                                  std::string(Name(info.param.dtype));
                         });

// (b) Saved by 4 ranks at stage 2, loaded by 1, 2 and 8 ranks at other
// stages: the model states are identical, and training goes on exactly as
// the single-process reference of that many ranks from those states. It
// does not equal the 4-rank continuation: each rank draws its own batches,
// so another world size trains on other data.
struct Reshard {
  int world, stage;
};

class ReshardFromFourRanks : public ::testing::TestWithParam<Reshard> {};

TEST_P(ReshardFromFourRanks, StatesIdenticalAndTrainingContinues) {
  const auto [world, stage] = GetParam();
  const std::unique_ptr<Model> model = SmallTransformer();
  const std::string dir = FreshDir("reshard");
  checkpoint::SaveOptions options;
  options.chunk_elements = 37;  // chunks straddle the new pieces' edges
  ModelStates saved, states;
  std::unique_ptr<Cluster> saver =
      TrainAndSave(*model, SmallRun(4, 2), kSteps, dir, &saved, options);
  ASSERT_TRUE(saver);
  std::unique_ptr<Cluster> loaded = LoadFresh(*model, SmallRun(world, stage), dir, &states);
  ASSERT_TRUE(loaded);
  ExpectStatesIdentical(saved, states, "after loading");
  ExpectParamsOnEveryRank(saved[0], *loaded, "after loading");

  ASSERT_TRUE(loaded->Train(kSteps, 2 * kSteps).ok());
  absl::StatusOr<ModelStates> reference = ReferenceFrom(*model, saved, kSteps, 2 * kSteps, world, 1,
                                                        SmallRun(world, stage).seed, AdamW());
  ASSERT_TRUE(reference.ok()) << reference.status();
  ExpectParamsOnEveryRank((*reference)[0], *loaded, "trained on");
  ASSERT_TRUE(saver->Train(kSteps, 2 * kSteps).ok());
  absl::StatusOr<std::vector<ParamSet>> four = saver->Params();
  ASSERT_TRUE(four.ok());
  EXPECT_NE(std::memcmp((*four)[0][0].data(), (*reference)[0][0].data(), 4 * (*four)[0][0].size()),
            0)
      << "another world size trains on other batches";
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, ReshardFromFourRanks,
                         ::testing::Values(Reshard{1, 0}, Reshard{2, 1}, Reshard{8, 3},
                                           Reshard{8, 2}),
                         [](const auto& info) {
                           return "to" + std::to_string(info.param.world) + "ranks_stage" +
                                  std::to_string(info.param.stage);
                         });

// The reference above is the same arithmetic as the engine: from the same
// states at the same world size it reproduces the uninterrupted run.
TEST(CheckpointReference, ReproducesTheEngineAtTheSameWorldSize) {
  const std::unique_ptr<Model> model = SmallTransformer();
  std::unique_ptr<Cluster> cluster = MakeCluster(*model, SmallRun(4, 1));
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->Train(0, kSteps).ok());
  absl::StatusOr<ModelStates> at_k = cluster->States();
  ASSERT_TRUE(at_k.ok());
  ASSERT_TRUE(cluster->Train(kSteps, 2 * kSteps).ok());
  absl::StatusOr<ModelStates> reference =
      ReferenceFrom(*model, *at_k, kSteps, 2 * kSteps, 4, 1, SmallRun(4, 1).seed, AdamW());
  ASSERT_TRUE(reference.ok());
  absl::StatusOr<ModelStates> engine = cluster->States();
  ASSERT_TRUE(engine.ok());
  ExpectStatesIdentical(*reference, *engine, "reference");
}

// Masters are fp32 whatever the model dtype, so an fp32 checkpoint loads
// into a bf16 engine, whose parameters become the masters' bf16 rounding.
TEST(CheckpointAcrossDtypes, Fp32CheckpointLoadsIntoBf16Engine) {
  const std::unique_ptr<Model> model = SmallTransformer();
  const std::string dir = FreshDir("f32-to-bf16");
  ModelStates saved, states;
  ASSERT_TRUE(TrainAndSave(*model, SmallRun(4, 1), kSteps, dir, &saved));
  TrainingRun run = SmallRun(2, 3);
  run.config.param_dtype = DType::kBF16;
  std::unique_ptr<Cluster> loaded = LoadFresh(*model, run, dir, &states);
  ASSERT_TRUE(loaded);
  ExpectStatesIdentical(saved, states, "fp32 into bf16");
  ParamSet rounded = saved[0];
  for (auto& p : rounded) {
    for (float& x : p) x = BF16ToFloat(FloatToBF16(x));
  }
  ExpectParamsOnEveryRank(rounded, *loaded, "bf16 copies of the masters");
  EXPECT_TRUE(loaded->Train(kSteps, kSteps + 1).ok());
}

// (e) Each save goes to a new folder and `latest` moves only once it is
// complete, so a failed save leaves the previous checkpoint loadable.
TEST(CheckpointAtomicity, FailedSaveLeavesThePreviousCheckpoint) {
  const std::unique_ptr<Model> model = SmallTransformer();
  const std::string dir = FreshDir("atomic");
  ModelStates good;
  std::unique_ptr<Cluster> saver = TrainAndSave(*model, SmallRun(4, 2), kSteps, dir, &good);
  ASSERT_TRUE(saver);
  ASSERT_TRUE(saver->Train(kSteps, kSteps + 1).ok());

  // The disk fills up: no file may grow past 4 KiB (a data file is ~20 KiB).
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::vector<absl::Status> failed = saver->Save(dir);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  for (const absl::Status& s : failed) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("File too large"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/step-" + std::to_string(kSteps + 1)))
      << "the failed save's folder is removed";

  ModelStates states;
  ASSERT_TRUE(LoadFresh(*model, SmallRun(2, 3), dir, &states));
  ExpectStatesIdentical(good, states, "the checkpoint before the failed save");
}

TEST(CheckpointAtomicity, SavingTwiceAtOneStepKeepsBoth) {
  const std::unique_ptr<Model> model = SmallTransformer();
  const std::string dir = FreshDir("twice");
  std::unique_ptr<Cluster> saver = MakeCluster(*model, SmallRun(2, 1));
  ASSERT_TRUE(saver);
  ASSERT_TRUE(saver->Train(0, 1).ok());
  ASSERT_TRUE(AllOk(saver->Save(dir)).ok());
  ASSERT_TRUE(AllOk(saver->Save(dir)).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/step-1/manifest"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/step-1.1/manifest"));
  std::ifstream latest(dir + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-1.1");
  std::unique_ptr<Cluster> loaded = MakeCluster(*model, SmallRun(2, 1));
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(AllOk(loaded->Load(dir + "/step-1")).ok()) << "a step folder loads directly";
}

TEST(CheckpointAtomicity, UnusableRootIsAnErrorOnEveryRank) {
  const std::unique_ptr<Model> model = SmallTransformer();
  const std::string file = FreshDir("not-a-folder") + "/file";
  std::ofstream(file) << "x";
  std::unique_ptr<Cluster> saver = MakeCluster(*model, SmallRun(4, 0));
  ASSERT_TRUE(saver);
  for (const absl::Status& s : saver->Save(file)) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr(file));
  }
  EXPECT_TRUE(saver->Train(0, 1).ok()) << "the engines carry on";
}

// Hybrid sharding: every replica group holds the same shards, so the
// checkpoint is the first group's 2 files; it loads into another hybrid
// cluster and into a plain one of another size with the same states, and
// the hybrid run resumed from it continues as the uninterrupted one did.
TEST(CheckpointHybrid, OneGroupsFilesLoadAtAnyLayout) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(4, 2);
  run.ranks_per_node = 2;
  run.config.shard_group_size = 2;
  std::unique_ptr<Cluster> cluster = MakeCluster(*model, run);
  ASSERT_TRUE(cluster);
  ASSERT_TRUE(cluster->Train(0, 1).ok());
  const std::string root = FreshDir("hybrid");
  ASSERT_TRUE(AllOk(cluster->Save(root)).ok());
  const ModelStates saved = *cluster->States();
  EXPECT_TRUE(std::filesystem::exists(root + "/step-1/rank-00001-of-00002.bin"));
  EXPECT_FALSE(std::filesystem::exists(root + "/step-1/rank-00003-of-00004.bin"));
  ASSERT_TRUE(cluster->Train(1, 2).ok());
  const ModelStates uninterrupted = *cluster->States();

  std::unique_ptr<Cluster> hybrid = MakeCluster(*model, run);
  ASSERT_TRUE(hybrid);
  ASSERT_TRUE(AllOk(hybrid->Load(root)).ok());
  ExpectStatesIdentical(saved, *hybrid->States(), "hybrid from hybrid");
  ASSERT_TRUE(hybrid->Train(1, 2).ok());
  ExpectStatesIdentical(uninterrupted, *hybrid->States(), "resumed hybrid");

  std::unique_ptr<Cluster> plain = MakeCluster(*model, SmallRun(3, 2));
  ASSERT_TRUE(plain);
  ASSERT_TRUE(AllOk(plain->Load(root)).ok());
  ExpectStatesIdentical(saved, *plain->States(), "3 plain ranks from hybrid");
}

}  // namespace
}  // namespace zero::testing_model
