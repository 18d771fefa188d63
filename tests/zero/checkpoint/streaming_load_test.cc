// Load under a host staging budget: a checkpoint many times larger than the
// budget loads bit for bit, into the same and into other world sizes, while
// the staging stays within it; a budget too small for one chunk is an error
// on every rank that changes nothing.
#include <sys/mman.h>

#include <chrono>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/resident_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/checkpoint/expect.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/comm/local_communicator.h"
#include "zero/checkpoint/internal/agreement.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/data_file.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/load_plan.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/pinned_buffers.h"

namespace zero::testing_model {
namespace {

using ::testing::HasSubstr;

constexpr size_t kBudget = 64 << 10;     // bytes per rank
constexpr size_t kChunkElements = 2048;  // 8 KiB chunks

class StreamingLoad : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    model_ = *MakeMlp(256, 512, 256, 4);  // 263k parameters, 3.2 MB of AdamW states
    auto saver = Cluster::Create(*model_, SmallRun(4, 2), AdamW());
    ASSERT_TRUE(saver.ok()) << saver.status();
    ASSERT_TRUE((*saver)->Train(0, 2).ok());
    dir_ = FreshDir("streaming");
    ASSERT_TRUE(AllOk((*saver)->Save(dir_, {.chunk_elements = kChunkElements})).ok());
    saved_ = *(*saver)->States();
  }

  // Loads into `cluster` with `options` on every rank; each rank's stats.
  std::vector<checkpoint::LoadStats> Load(Cluster& cluster, checkpoint::LoadOptions options,
                                          absl::Status* status) {
    std::vector<checkpoint::LoadStats> stats(cluster.world());
    *status = AllOk(cluster.Run([&](int rank) {
      checkpoint::LoadOptions mine = options;
      mine.stats = &stats[rank];
      return checkpoint::Load(cluster.participant(rank), dir_, mine);
    }));
    return stats;
  }

  std::unique_ptr<Model> model_;
  std::string dir_;
  ModelStates saved_;
};

TEST_P(StreamingLoad, ManyTimesTheBudgetLoadsBitForBitWithinIt) {
  const int world = GetParam();
  auto cluster = Cluster::Create(*model_, SmallRun(world, 3), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::Status status;
  const std::vector<checkpoint::LoadStats> stats =
      Load(**cluster, {.staging_bytes = kBudget}, &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded");
  size_t numel = 0;
  for (const ParamInfo& p : model_->params()) numel += p.numel;
  const size_t rank_bytes = numel * saved_.size() * sizeof(float) / world;
  EXPECT_GE(rank_bytes, 8 * kBudget);  // what makes the test mean something
  for (int r = 0; r < world; ++r) {
    EXPECT_GT(stats[r].peak_staging_bytes, 0u) << r;
    EXPECT_LE(stats[r].peak_staging_bytes, kBudget * 6 / 5) << r;
    EXPECT_GE(stats[r].bytes_read, 2 * rank_bytes * 9 / 10) << r;  // two passes
  }
  // And training goes on from there as the saved run would.
  EXPECT_TRUE((*cluster)->Train(2, 3).ok());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, StreamingLoad, ::testing::Values(4, 2, 3));

TEST_F(StreamingLoad, OnePassLoadsTheSame) {
  auto cluster = Cluster::Create(*model_, SmallRun(3, 3), AdamW());
  ASSERT_TRUE(cluster.ok());
  absl::Status status;
  const std::vector<checkpoint::LoadStats> stats =
      Load(**cluster, {.staging_bytes = kBudget, .verify_before_placing = false}, &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded in one pass");
  EXPECT_LE(stats[0].peak_staging_bytes, kBudget);
}

// One pass keeps nothing for a second pass: it stages the reads in flight
// and as many being placed, however large the budget (it took all of it:
// fresh pages that cost more to fault in than to read).
TEST_F(StreamingLoad, OnePassStagesOnlyTwiceTheReadsInFlight) {
  auto cluster = Cluster::Create(*model_, SmallRun(2, 2), AdamW());
  ASSERT_TRUE(cluster.ok());
  absl::Status status;
  constexpr size_t kRead = 16 << 10;
  const std::vector<checkpoint::LoadStats> stats =
      Load(**cluster,
           {.staging_bytes = 64 << 20, .read_bytes = kRead, .reads_in_flight = 2,
            .verify_before_placing = false},
           &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded in one pass");
  for (const checkpoint::LoadStats& s : stats) {
    EXPECT_GT(s.peak_staging_bytes, 0u);
    EXPECT_LE(s.peak_staging_bytes, 4 * (kRead + 4096)) << "4 reads of at most 16 KiB, aligned";
  }
}

// A budget that holds a rank's whole share: pass 1's reads stay in the
// staging, verified, and pass 2 places them from there: the files are read
// once, and the result is the same.
TEST_F(StreamingLoad, ABudgetThatHoldsTheShareReadsTheFilesOnce) {
  auto cluster = Cluster::Create(*model_, SmallRun(4, 3), AdamW());
  ASSERT_TRUE(cluster.ok());
  absl::Status status;
  const std::vector<checkpoint::LoadStats> stats =
      Load(**cluster, {.staging_bytes = size_t{8} << 20}, &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded from staging");
  size_t numel = 0;
  for (const ParamInfo& p : model_->params()) numel += p.numel;
  const size_t rank_bytes = numel * saved_.size() * sizeof(float) / 4;
  for (int r = 0; r < 4; ++r) {
    EXPECT_GE(stats[r].bytes_read, rank_bytes * 9 / 10) << r;
    EXPECT_LE(stats[r].bytes_read, rank_bytes * 11 / 10) << r << ": read twice";
  }
}

// A budget of three quarters of a rank's share: pass 2 starts with what
// pass 1 left in the staging and reads again only the rest, so a rank reads
// its share once plus the excess over the budget (rounded up to one read of
// staging / reads_in_flight), not its share twice.
TEST_F(StreamingLoad, ASecondPassReadsOnlyWhatDidNotFit) {
  auto cluster = Cluster::Create(*model_, SmallRun(4, 3), AdamW());
  ASSERT_TRUE(cluster.ok());
  size_t numel = 0;
  for (const ParamInfo& p : model_->params()) numel += p.numel;
  const size_t rank_bytes = numel * saved_.size() * sizeof(float) / 4;
  const size_t budget = rank_bytes * 3 / 4;
  absl::Status status;
  const std::vector<checkpoint::LoadStats> stats =
      Load(**cluster, {.staging_bytes = budget, .reads_in_flight = 4}, &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded");
  for (int r = 0; r < 4; ++r) {
    const size_t excess = stats[r].bytes_read - rank_bytes;
    EXPECT_GT(excess, 0u) << r << ": the share does not fit, part of it is read twice";
    EXPECT_LE(excess, rank_bytes - budget + budget / 4 + (16 << 10)) << r << ": re-read too much";
  }
}

// One pass rebuilds each unit (stage 2: its parameters' all-gather) as soon
// as it is placed, so ranks that placed everything wait there for a rank
// whose read fails late. That
// rank still takes part in every unit's gathers: each rank returns the
// error well before the collective timeout (20 s here), the group stays
// sound, and loading the repaired checkpoint then works bit for bit.
TEST_F(StreamingLoad, AOnePassLoadThatFailsLateFailsEveryRankAndLeavesTheGroupSound) {
  auto cluster = Cluster::Create(*model_, SmallRun(4, 2), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string file = dir_ + "/step-2/" + checkpoint::DataFileName(3, 4);
  auto flip_last_byte = [&] {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(-1, std::ios::end);
    f.write(&c, 1);
  };
  flip_last_byte();
  absl::Status status;
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses = (*cluster)->Run([&](int rank) {
    return checkpoint::Load((*cluster)->participant(rank), dir_,
                            {.staging_bytes = kBudget, .verify_before_placing = false});
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "a rank waited for its peers' timeout";
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kDataLoss) << r << ": " << statuses[r];
    EXPECT_THAT(std::string(statuses[r].message()), HasSubstr("partly overwritten")) << r;
  }
  flip_last_byte();
  Load(**cluster, {.staging_bytes = kBudget, .verify_before_placing = false}, &status);
  ASSERT_TRUE(status.ok()) << status;
  ExpectStatesIdentical(saved_, *(*cluster)->States(), "loaded after the failed load");
  EXPECT_TRUE((*cluster)->Train(2, 3).ok());
}

TEST_F(StreamingLoad, BudgetBelowOneChunkIsAnErrorThatChangesNothing) {
  auto cluster = Cluster::Create(*model_, SmallRun(2, 3), AdamW());
  ASSERT_TRUE(cluster.ok());
  const ModelStates before = *(*cluster)->States();
  absl::Status status;
  Load(**cluster, {.staging_bytes = 4096}, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("staging budget of 4096 bytes"));
  ExpectStatesIdentical(before, *(*cluster)->States(), "after the refused load");
}

// Load's plan: reads of at most read_bytes (staging / reads_in_flight when
// that is less), as many buffers as the staging holds, reads_in_flight of
// them queued at once (at most one per buffer); the rank's share covered
// the same whatever the sizes.
TEST_F(StreamingLoad, ReadsAreBoundedAndQueuedAFewAtATime) {
  auto cluster = Cluster::Create(*model_, SmallRun(2, 3), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string step = dir_ + "/step-2";
  const std::string text = *checkpoint::ReadWholeFile(step + "/" + checkpoint::kManifestName);
  absl::StatusOr<checkpoint::Manifest> manifest = checkpoint::ParseManifest(text, step);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const Layout& layout = (*cluster)->participant(0).engine.layout();
  auto covered = [](const checkpoint::LoadPlan& plan) {
    uint64_t elements = 0;
    for (const checkpoint::ChunkRead& read : plan.reads) {
      for (const checkpoint::Placement& p : read.placements) elements += p.hi - p.lo;
    }
    return elements;
  };
  const uint64_t share =
      covered(*checkpoint::PlanLoad(*manifest, layout, 0, size_t{64} << 20, size_t{64} << 20, 1));
  ASSERT_GT(share * sizeof(float), size_t{1} << 20) << "what makes the test mean something";
  struct Case {
    size_t staging, read_bytes;
    int in_flight;
    size_t longest;  // read
    int queued;
  };
  // read_bytes binds; staging / in flight binds; one chunk (8 KiB, 12 KiB
  // aligned) binds: 2 buffers, so 2 in flight.
  for (const Case c : {Case{1 << 20, 64 << 10, 4, 64 << 10, 4},
                       Case{256 << 10, 1 << 20, 4, 64 << 10, 4},
                       Case{24 << 10, 64 << 10, 4, 12 << 10, 2}}) {
    absl::StatusOr<checkpoint::LoadPlan> plan =
        checkpoint::PlanLoad(*manifest, layout, 0, c.staging, c.read_bytes, c.in_flight);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_LE(plan->slot_bytes, c.longest) << c.staging;
    EXPECT_GE(plan->slot_bytes, c.longest / 2) << c.staging << ": reads as long as allowed";
    for (const checkpoint::ChunkRead& read : plan->reads) {
      EXPECT_LE(read.end - read.begin, c.longest);
    }
    EXPECT_EQ(plan->slots, static_cast<int>(c.staging / plan->slot_bytes)) << c.staging;
    EXPECT_LE(plan->staging_bytes(), c.staging);
    EXPECT_EQ(plan->in_flight, c.queued) << c.staging;
    EXPECT_EQ(covered(*plan), share) << c.staging;
  }
}

// Measured, not the loader's own figure: while a checkpoint 10x the
// ranks' staging loads, the process's resident memory rises by about the
// staging and not by the checkpoint (the second load is measured: the
// first also faults in the engines' own buffers for the first time).
TEST(StreamingLoadMemory, ResidentMemoryRisesByTheStagingNotTheCheckpoint) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory and quarantine are resident too";
#endif
  constexpr int kWorld = 4;
  constexpr size_t kStaging = 256 << 10;            // per rank
  constexpr uint64_t kSlack = uint64_t{4} << 20;  // reader threads' stacks and malloc arenas
  const std::unique_ptr<Model> model = *MakeMlp(512, 1024, 512, 4);  // 1M parameters
  const std::string dir = FreshDir("resident");
  {
    auto saver = Cluster::Create(*model, SmallRun(kWorld, 1), AdamW());
    ASSERT_TRUE(saver.ok()) << saver.status();
    ASSERT_TRUE((*saver)->Train(0, 1).ok());
    ASSERT_TRUE(AllOk((*saver)->Save(dir, {.chunk_elements = 8192})).ok());
  }
  auto cluster = Cluster::Create(*model, SmallRun(kWorld, 1), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto load = [&] {
    return AllOk((*cluster)->Run([&](int rank) {
      return checkpoint::Load((*cluster)->participant(rank), dir, {.staging_bytes = kStaging});
    }));
  };
  ASSERT_TRUE(load().ok());
  const ModelStates loaded = *(*cluster)->States();
  uint64_t checkpoint_bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) checkpoint_bytes += entry.file_size();
  }
  const uint64_t bound = kWorld * kStaging * 6 / 5 + kSlack;
  ASSERT_GE(checkpoint_bytes, 2 * bound) << "the test must mean something";
  absl::Status status;
  const uint64_t growth = PeakResidentGrowth([&] { status = load(); });
  ASSERT_TRUE(status.ok()) << status;
  // 1.9 MB measured here: the 1 MiB of staging, the reader threads and what
  // the loader keeps besides.
  EXPECT_LE(growth, bound) << "a " << checkpoint_bytes << "-byte checkpoint";
  ExpectStatesIdentical(loaded, *(*cluster)->States(), "loaded again");
}

// The staging Load reads into (and the snapshot a save writes from): as
// many distinct buffers as asked, each rounded up to 4 KiB and aligned to it
// (O_DIRECT), writable end to end, none overlapping another.
TEST(PinnedBuffers, DistinctAlignedWritableBuffers) {
  std::unique_ptr<DeviceSystem> devices =
      DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, size_t{64} << 20}).value();
  absl::StatusOr<std::unique_ptr<checkpoint::PinnedBuffers>> buffers =
      checkpoint::PinnedBuffers::Create(*devices, 5, 10'000);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  const checkpoint::PinnedBuffers& b = **buffers;
  ASSERT_EQ(b.count(), 5u);
  EXPECT_EQ(b.bytes(), 12'288u);
  for (size_t i = 0; i < b.count(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b[i]) % 4096, 0u) << i;
    std::memset(b[i], static_cast<int>(i + 1), b.bytes());
  }
  for (size_t i = 0; i < b.count(); ++i) {
    EXPECT_EQ(b[i][0], std::byte(i + 1)) << i;
    EXPECT_EQ(b[i][b.bytes() - 1], std::byte(i + 1)) << i;
  }
}

// Arenas of 1 GiB held 85 buffers of 12 MiB + 4 KiB (the default chunk and
// read size) and lost the rest of each; the pool's capacity had room for
// one buffer more than asked, so a 4 GiB staging (341 buffers) failed.
TEST(PinnedBuffers, StagingPastOneGibFitsItsCapacity) {
  std::unique_ptr<DeviceSystem> devices =
      DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, size_t{64} << 20}).value();
  const size_t each = (size_t{12} << 20) + 4096;
  absl::StatusOr<std::unique_ptr<checkpoint::PinnedBuffers>> buffers =
      checkpoint::PinnedBuffers::Create(*devices, 341, each);
  ASSERT_TRUE(buffers.ok()) << buffers.status();
  EXPECT_EQ((*buffers)->count(), 341u);
  std::memset((**buffers)[340], 1, each);  // the last one is whole
}

// Each rank read `latest` itself: repointed between two ranks' reads (a
// job saving into the same root, a client's stale cache), the ranks loaded
// two checkpoints, every check passed and the engines held a mixture. Now
// rank 0 resolves it for all.
TEST(LoadAgreement, EveryRankLoadsTheCheckpointRankZeroResolved) {
  const std::unique_ptr<Model> model = *MakeMlp(16, 32, 16, 2);
  const std::string dir = FreshDir("latest_race");
  auto saver = Cluster::Create(*model, SmallRun(2, 2), AdamW());
  ASSERT_TRUE(saver.ok()) << saver.status();
  ASSERT_TRUE((*saver)->Train(0, 1).ok());
  ASSERT_TRUE(AllOk((*saver)->Save(dir)).ok());  // step-1
  ASSERT_TRUE((*saver)->Train(1, 2).ok());
  ASSERT_TRUE(AllOk((*saver)->Save(dir)).ok());  // step-2
  ASSERT_TRUE(checkpoint::PointLatestAt(dir, "step-1").ok());
  auto loader = Cluster::Create(*model, SmallRun(2, 2), AdamW());
  ASSERT_TRUE(loader.ok()) << loader.status();
  const absl::Status loaded = AllOk((*loader)->Run([&](int rank) {
    if (rank == 1) {  // rank 0 has read `latest` by now and waits for rank 1
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (absl::Status s = checkpoint::PointLatestAt(dir, "step-2"); !s.ok()) return s;
    }
    return checkpoint::Load((*loader)->participant(rank), dir);
  }));
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ((*loader)->engine(0).owned_state().resume_point().steps, 1);
  EXPECT_EQ((*loader)->engine(1).owned_state().resume_point().steps, 1) << "rank 1 loaded another checkpoint";
}

// A failed (stream-ordered) group returned from AllGather with the copy of
// the caller's record still queued: the caller freed the record (AllOk's
// is a temporary) while the stream read it. The record here lives in a page
// unmapped right after the call, so a late copy faults.
TEST(LoadAgreementDeathTest, AFailedGatherLeavesNoCopyOfTheCallersRecordBehind) {
  EXPECT_EXIT(
      {
        HostStreamOptions slow;
        slow.min_delay = absl::Milliseconds(50);
        slow.max_delay = absl::Milliseconds(50);
        auto devices = DeviceSystem::CreateWithHostStreams(
                           {DeviceSpec::Kind::kHost, 1, size_t{64} << 20}, slow)
                           .value();
        auto comms = LocalGroup::Create(2, {.stream_ordered = true}).value();
        comms[0]->Abort(absl::InternalError("a peer failed"));
        Stream* stream = devices->default_stream(0);
        checkpoint::Agreement agree(*comms[0], devices->pool(0), stream);
        void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
        std::memset(page, 'x', 4096);
        const bool failed = !agree.AllGather(std::string_view(static_cast<char*>(page), 512)).ok();
        munmap(page, 4096);
        (void)stream->Synchronize();
        std::fprintf(stderr, failed ? "failed cleanly\n" : "did not fail\n");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "failed cleanly");
}

}  // namespace
}  // namespace zero::testing_model
