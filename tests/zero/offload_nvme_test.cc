// ZeRO-Infinity: master weights and optimizer state in a file per rank
// (offload_device nvme), stepped chunk by chunk. Training equals the host
// offload bit for bit at every stage and precision, host memory holds only
// the staging, and a folder that cannot hold the file (missing, or not
// writable) is an error on every rank.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status_macros.h"
#include "offload/state_file.h"
#include "tests/zero/test_util.h"
#include "tests/zero/training.h"

namespace zero::testing_model {
namespace {

constexpr size_t kChunk = 3000;  // several chunks a unit, a partial one at the end

// Writes junk at the start of each of the first `pages` 4 KiB pages of the
// file at `path`, under the engine's feet.
absl::Status Scribble(const std::string& path, int pages) {
  const int fd = open(path.c_str(), O_WRONLY);
  if (fd < 0) return absl::InternalError("cannot open " + path);
  const char junk[16] = "not the state";
  absl::Status status;
  for (off_t at = 0; at < off_t{pages} * 4096 && status.ok(); at += 4096) {
    if (pwrite(fd, junk, sizeof junk, at) != static_cast<ssize_t>(sizeof junk)) {
      status = absl::InternalError("cannot write " + path);
    }
  }
  close(fd);
  return status;
}

std::string Folder() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::unique_ptr<Model> WideModel() { return *MakeTransformer(6, 64, 2, 8, 2); }

TrainingRun HostOffloadRun(int stage, Offload offload, DType dtype, bool overlap) {
  // Room for stage 1's whole gradients.
  TrainingRun run = OffloadRun(stage, offload, size_t{8} << 20);
  run.steps = 4;
  run.config.param_dtype = dtype;
  run.config.offload_overlap = overlap;
  return run;
}

TrainingRun NvmeRun(TrainingRun run) {
  run.config.offload_device = OffloadDevice::kNvme;
  run.config.nvme_path = Folder();
  run.config.nvme_chunk_elements = kChunk;
  return run;
}

// stage, offload, dtype, overlap
using Case = std::tuple<int, Offload, DType, bool>;

class NvmeMatchesHostOffload : public ::testing::TestWithParam<Case> {};

TEST_P(NvmeMatchesHostOffload, BitForBit) {
  const auto [stage, offload, dtype, overlap] = GetParam();
  std::unique_ptr<Model> model = WideModel();
  const TrainingRun host_run = HostOffloadRun(stage, offload, dtype, overlap);
  std::vector<RankResult> host = TrainWithEngine(*model, host_run, AdamW());
  std::vector<RankResult> nvme = TrainWithEngine(*model, NvmeRun(host_run), AdamW());
  // The state file's buffers of three planes, each padded to the file's 4 KiB.
  const size_t staging = StateFile::kStagingBuffers * ((3 * kChunk * sizeof(float) + 4095) / 4096 * 4096);
  for (int r = 0; r < host_run.world; ++r) {
    ASSERT_TRUE(host[r].status.ok()) << "rank " << r << ": " << host[r].status;
    ASSERT_TRUE(nvme[r].status.ok()) << "rank " << r << ": " << nvme[r].status;
    ExpectBitIdentical(host[r].params, nvme[r].params, "rank " + std::to_string(r));
    const EngineStats& s = nvme[r].stats;
    // Master and Adam's two moments of this rank's half, in the file.
    EXPECT_GE(s.nvme_bytes, 3 * 4 * 300'000 / host_run.world);
    EXPECT_GE(s.nvme_bytes_read, host_run.steps * s.nvme_bytes) << "read once a step, at least";
    EXPECT_GE(s.nvme_bytes_written, host_run.steps * s.nvme_bytes);
    // Host memory held the staging instead of the state (and, fp32, the
    // piece to publish: the master itself is in the file).
    const size_t publish = dtype == DType::kF32 && offload == Offload::kOptimizer ? s.nvme_bytes / 3 : 0;
    EXPECT_LE(s.peak_host_bytes + s.nvme_bytes, host[r].stats.peak_host_bytes + staging + publish)
        << "rank " << r;
    EXPECT_EQ(s.pool.tag(Tag::kOptimizerState).peak, 0u);
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto [stage, offload, dtype, overlap] = info.param;
  return "stage" + std::to_string(stage) +
         (offload == Offload::kParameters ? "_params_" : "_optimizer_") +
         std::string(Name(dtype)) + (overlap ? "_overlap" : "_after");
}

INSTANTIATE_TEST_SUITE_P(
    Engine, NvmeMatchesHostOffload,
    ::testing::Values(Case{1, Offload::kOptimizer, DType::kF32, true},
                      Case{1, Offload::kOptimizer, DType::kBF16, false},
                      Case{2, Offload::kOptimizer, DType::kF32, false},
                      Case{2, Offload::kOptimizer, DType::kBF16, true},
                      Case{3, Offload::kOptimizer, DType::kF32, true},
                      Case{3, Offload::kOptimizer, DType::kBF16, false},
                      Case{3, Offload::kParameters, DType::kF32, false},
                      Case{3, Offload::kParameters, DType::kBF16, true}),
    CaseName);

TEST(OffloadNvme, AFolderThatCannotHoldTheFileIsAnErrorOnEveryRank) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = NvmeRun(HostOffloadRun(2, Offload::kOptimizer, DType::kF32, true));
  run.config.nvme_path = Folder() + "/no/such/folder";
  run.steps = 1;
  // Both ranks fail to open at once. abseil's strerror table is a function-
  // local static in an uninstrumented library, whose guard TSan cannot see:
  // build it here, before the ranks' threads.
  (void)absl::ErrnoToStatus(ENOENT, "warm-up");
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, AdamW());
  for (int r = 0; r < run.world; ++r) {
    EXPECT_FALSE(ranks[r].status.ok()) << "rank " << r;
    EXPECT_THAT(std::string(ranks[r].status.message()), ::testing::HasSubstr("/no/such/folder"))
        << "rank " << r;
  }
}

TEST(OffloadNvme, AFolderThatIsNotWritableIsAnErrorOnEveryRank) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = NvmeRun(HostOffloadRun(2, Offload::kOptimizer, DType::kF32, true));
  run.config.nvme_path = Folder() + "/read_only";
  run.steps = 1;
  ASSERT_EQ(mkdir(run.config.nvme_path.c_str(), 0555) == 0 || errno == EEXIST, true);
  ASSERT_EQ(chmod(run.config.nvme_path.c_str(), 0555), 0);
  (void)absl::ErrnoToStatus(EACCES, "warm-up");  // as above: before the ranks' threads
  std::vector<RankResult> ranks;
  {
    WithoutPermissionOverride guard;
    if (!WithoutPermissionOverride::Refused(run.config.nvme_path)) {
      GTEST_SKIP() << "this process writes into a 0555 folder (permissions not enforced here)";
    }
    ranks = TrainWithEngine(*model, run, AdamW());
  }
  for (int r = 0; r < run.world; ++r) {
    EXPECT_EQ(ranks[r].status.code(), absl::StatusCode::kPermissionDenied)
        << "rank " << r << ": " << ranks[r].status;
    EXPECT_THAT(std::string(ranks[r].status.message()), ::testing::HasSubstr("/read_only"))
        << "rank " << r;
  }
}

TEST(OffloadNvme, BadConfigurations) {
  EngineConfig c;
  c.stage = 2;
  c.offload_device = OffloadDevice::kNvme;
  c.nvme_path = Folder();
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument) << "without offload";
  c.offload = Offload::kOptimizer;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.nvme_path.clear();
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument) << "without a path";
}

// A file changed underneath on one rank: its step reads DataLoss, and the
// other rank gets an error too instead of waiting for it.
TEST(OffloadNvme, AFileChangedUnderneathIsAnErrorOnEveryRank) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = NvmeRun(HostOffloadRun(2, Offload::kOptimizer, DType::kF32, true));
  run.steps = 2;
  run.before_training = [](int rank, Engine& engine) -> absl::Status {
    if (rank != 0) return absl::OkStatus();
    return Scribble(engine.owned_state().nvme_file(), 64);
  };
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, AdamW());
  EXPECT_EQ(ranks[0].status.code(), absl::StatusCode::kDataLoss) << ranks[0].status;
  EXPECT_THAT(std::string(ranks[0].status.message()), ::testing::HasSubstr("changed underneath"));
  EXPECT_FALSE(ranks[1].status.ok()) << "rank 1 must not wait for rank 0 forever";
}

// A disk that fills during a step (here a file-size limit of 64 KiB, far
// below every rank's file, so every write past it fails): every rank's Step
// is an error that names a file that filled (its own, or that of the rank
// whose failure aborted the group first), and none waits for another.
TEST(OffloadNvme, ADiskThatFillsDuringAStepIsAnErrorOnEveryRank) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = NvmeRun(HostOffloadRun(2, Offload::kOptimizer, DType::kF32, false));
  run.steps = 2;
  ASSERT_EQ(run.world, 2);  // files[0], files[1] below
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  std::atomic<bool> limited{false}, released{false};
  std::atomic<int> ready{0};
  std::vector<std::string> files(run.world);
  // Waits up to 20 s; false when it did not come (a rank failed its setup).
  auto await = [](const std::function<bool()>& ready_now) {
    for (int i = 0; i < 20000 && !ready_now(); ++i) absl::SleepFor(absl::Milliseconds(1));
    return ready_now();
  };
  run.before_training = [&](int rank, Engine& engine) -> absl::Status {
    // The limit is the process's: set once every rank has written its
    // initial state, so that it fails the step, not a rank's setup.
    files[rank] = engine.owned_state().nvme_file();
    ++ready;
    if (rank != 0) {
      return await([&] { return released.load(); }) ? absl::OkStatus()
                                                     : absl::DeadlineExceededError("no limit");
    }
    if (!await([&] { return ready.load() == run.world; })) {
      released = true;
      return absl::DeadlineExceededError("a rank never got ready");
    }
    struct stat st;
    if (stat(engine.owned_state().nvme_file().c_str(), &st) == 0 && st.st_size > (256 << 10)) {
      rlimit small = saved;
      small.rlim_cur = 64 << 10;
      limited = setrlimit(RLIMIT_FSIZE, &small) == 0;
    }
    released = true;
    return absl::OkStatus();
  };
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, AdamW());
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  signal(SIGXFSZ, old_handler);
  ASSERT_TRUE(limited);
  for (int r = 0; r < run.world; ++r) {
    EXPECT_FALSE(ranks[r].status.ok()) << "rank " << r;
    EXPECT_THAT(std::string(ranks[r].status.message()),
                ::testing::AnyOf(::testing::HasSubstr(files[0]), ::testing::HasSubstr(files[1])))
        << "rank " << r << " names no file: " << ranks[r].status;
  }
}

// SetParam wrote the model's copy of the parameter before its master on
// NVMe: a master write that failed (the file changed underneath) returned
// an error with the parameter already changed, the master not.
TEST(OffloadNvme, AFailedSetParamLeavesTheParameterAsItWas) {
  std::unique_ptr<Model> model = WideModel();
  TrainingRun run = NvmeRun(HostOffloadRun(2, Offload::kOptimizer, DType::kF32, false));
  run.steps = 1;
  run.before_training = [](int rank, Engine& engine) -> absl::Status {
    if (rank != 0) return absl::CancelledError("only rank 0 sets the parameter");
    RETURN_IF_ERROR(Scribble(engine.owned_state().nvme_file(), 1024));
    absl::StatusOr<std::span<float>> param = engine.param(0);
    if (!param.ok()) return param.status();
    const std::vector<float> before(param->begin(), param->end());
    const absl::Status set = engine.SetParam(0, std::vector<float>(before.size(), 42.0f));
    EXPECT_EQ(set.code(), absl::StatusCode::kDataLoss) << set;
    param = engine.param(0);
    if (!param.ok()) return param.status();
    EXPECT_EQ(std::vector<float>(param->begin(), param->end()), before)
        << "a failed SetParam changed the parameter";
    return absl::CancelledError("checked");
  };
  std::vector<RankResult> ranks = TrainWithEngine(*model, run, AdamW());
  EXPECT_THAT(std::string(ranks[0].status.message()), ::testing::HasSubstr("checked"));
}

// What a checkpoint load does: every rank writes its owned state through
// StreamOwnedState, then Restore rebuilds the parameters from it. The file
// and host memory give the same training afterwards, bit for bit.
TEST(OffloadNvme, StreamedOwnedStateRestoresLikeHostMemory) {
  std::unique_ptr<Model> model = WideModel();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    TrainingRun run = HostOffloadRun(3, Offload::kOptimizer, dtype, false);
    run.steps = 2;
    run.before_training = [](int rank, Engine& engine) -> absl::Status {
      for (int u = 0; u < static_cast<int>(engine.layout().units().size()); ++u) {
        RETURN_IF_ERROR(engine.owned_state().Stream(
            u, OwnedStateAccess::Access::kWrite, [&](size_t at, size_t n, std::span<float* const> p) {
              for (size_t i = 0; i < n; ++i) {
                p[0][i] = 0.01f * static_cast<float>((at + i + u + rank) % 97) - 0.4f;
                for (size_t s = 1; s < p.size(); ++s) p[s][i] = s == 2 ? 1e-4f : 1e-3f;
              }
              return absl::OkStatus();
            }));
      }
      // A part of one piece, one plane: the other planes stay.
      const size_t shard = engine.layout().units()[0].shard;
      RETURN_IF_ERROR(engine.owned_state().Stream(
          0, 10, std::min<size_t>(shard - 10, 5000), OwnedStateAccess::Access::kUpdate,
          [](size_t, size_t n, std::span<float* const> p) {
            for (size_t i = 0; i < n; ++i) p[1][i] *= 2;
            return absl::OkStatus();
          }));
      if (engine.owned_state().Stream(0, shard, 1, OwnedStateAccess::Access::kRead,
                                  [](size_t, size_t, auto) { return absl::OkStatus(); })
              .ok()) {
        return absl::InternalError("an element past the piece was accepted");
      }
      return engine.owned_state().Restore({.steps = 3});
    };
    std::vector<RankResult> host = TrainWithEngine(*model, run, AdamW());
    std::vector<RankResult> nvme = TrainWithEngine(*model, NvmeRun(run), AdamW());
    for (int r = 0; r < run.world; ++r) {
      ASSERT_TRUE(host[r].status.ok()) << "rank " << r << ": " << host[r].status;
      ASSERT_TRUE(nvme[r].status.ok()) << nvme[r].status;
      ExpectBitIdentical(host[r].params, nvme[r].params, "rank " + std::to_string(r));
    }
  }
}

}  // namespace
}  // namespace zero::testing_model
