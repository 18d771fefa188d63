// AsyncSaver: Start returns before the snapshot is copied; steps taken
// while it copies and while the background writer writes do not change
// what is written (also when the state is larger than the snapshot buffers
// and the copy must wait for the writer); the next Start waits for the
// previous save; a saver destroyed before Wait publishes nothing; errors
// reach every rank. And the engine's guard of its owned state.
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status_macros.h"
#include "tests/zero/checkpoint/expect.h"
#include "tests/zero/test_util.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/checkpoint/internal/file_io.h"

namespace zero::testing_model {
namespace {

using ::testing::HasSubstr;

using Savers = std::vector<std::unique_ptr<checkpoint::AsyncSaver>>;

Savers MakeSavers(Cluster& cluster, const checkpoint::SaveOptions& options) {
  Savers savers;
  for (int r = 0; r < cluster.world(); ++r) {
    savers.push_back(std::make_unique<checkpoint::AsyncSaver>(cluster.participant(r), options));
  }
  return savers;
}

absl::Status StartAll(Cluster& cluster, Savers& savers, const std::string& root) {
  return AllOk(cluster.Run([&](int r) { return savers[r]->Start(root); }));
}

absl::Status WaitAll(Cluster& cluster, Savers& savers) {
  return AllOk(cluster.Run([&](int r) { return savers[r]->Wait().status(); }));
}

// The model states a fresh 2-rank cluster loads from `path`, and the step
// count it resumes at.
ModelStates LoadedStates(const Model& model, const std::string& path, int64_t* steps = nullptr) {
  auto cluster = Cluster::Create(model, SmallRun(2, 3), AdamW());
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(AllOk((*cluster)->Load(path)).ok());
  if (steps != nullptr) *steps = (*cluster)->engine(0).owned_state().resume_point().steps;
  return *(*cluster)->States();
}

struct Budget {
  size_t write_bytes, snapshot_bytes;
};

class AsyncSave : public ::testing::TestWithParam<Budget> {};

TEST_P(AsyncSave, StepsDuringTheWriteDoNotChangeWhatIsWritten) {
  const std::unique_ptr<Model> model = *MakeMlp(64, 128, 64, 4);  // 17k parameters
  auto cluster = Cluster::Create(*model, SmallRun(4, 2), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->Train(0, 2).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("async");
  Savers savers = MakeSavers(**cluster, {.chunk_elements = 1000,
                                         .snapshot_bytes = GetParam().snapshot_bytes,
                                         .write_bytes = GetParam().write_bytes});
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  ASSERT_TRUE((*cluster)->Train(2, 4).ok());  // while the writer writes
  ASSERT_TRUE(WaitAll(**cluster, savers).ok());
  const ModelStates after = *(*cluster)->States();
  ASSERT_NE(Hash(after), Hash(at_save));  // the steps did change the engine
  int64_t steps = 0;
  ExpectStatesIdentical(at_save, LoadedStates(*model, root, &steps), "loaded");
  EXPECT_EQ(steps, 2);
}

INSTANTIATE_TEST_SUITE_P(
    SnapshotSizes, AsyncSave,
    ::testing::Values(Budget{size_t{8} << 20, size_t{256} << 20},  // all fits: Start never waits
                      Budget{4096, 2 * 4096}));  // 50 KiB per rank through two 4 KiB buffers

// Reserve takes at setup the buffers the first Start would take while
// training waits: as many as the rank's state needs, bounded by
// snapshot_bytes, and Start then takes no more.
TEST(AsyncSaver, ReserveTakesTheSnapshotBuffersBeforeTheFirstStart) {
  const std::unique_ptr<Model> model = *MakeMlp(64, 128, 64, 4);  // 17k parameters
  auto cluster = Cluster::Create(*model, SmallRun(2, 2), AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("reserve");
  // ~100 KiB of state per rank: 25 buffers of 4 KiB, but only 8 allowed.
  Savers bounded = MakeSavers(**cluster, {.snapshot_bytes = 8 * 4096, .write_bytes = 4096});
  Savers roomy = MakeSavers(**cluster, {.write_bytes = 4096});
  for (Savers* savers : {&bounded, &roomy}) {
    EXPECT_EQ((*savers)[0]->snapshot_buffer_bytes(), 0u);
    ASSERT_TRUE(AllOk((*cluster)->Run([&](int r) { return (*savers)[r]->Reserve(); })).ok());
  }
  EXPECT_EQ(bounded[0]->snapshot_buffer_bytes(), 8u * 4096);
  const size_t reserved = roomy[0]->snapshot_buffer_bytes();
  EXPECT_GT(reserved, 16u * 4096) << "the whole state, more than the bounded saver";
  EXPECT_LT(reserved, 64u * 4096);
  ASSERT_TRUE(StartAll(**cluster, roomy, root).ok());
  EXPECT_EQ(roomy[0]->Reserve().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(WaitAll(**cluster, roomy).ok());
  EXPECT_EQ(roomy[0]->snapshot_buffer_bytes(), reserved) << "Start took more than Reserve";
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "loaded");
}

// Each writing thread's first write, held until the test lets it go (or
// 5 s pass): a Start that wrote on the caller's thread would return only
// after its held write, with no writer held any more.
std::atomic<int> writers_held{0};
std::atomic<bool> let_go{false};
absl::Status HoldFirstWrite(checkpoint::FileOp op, std::string_view) {
  thread_local bool held_once = false;
  if (op != checkpoint::FileOp::kWrite || let_go || held_once) return absl::OkStatus();
  held_once = true;
  ++writers_held;
  for (int i = 0; i < 500 && !let_go; ++i) absl::SleepFor(absl::Milliseconds(10));
  --writers_held;
  return absl::OkStatus();
}

TEST(AsyncSaver, StartReturnsWhileTheWriterIsStillWriting) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("held");
  Savers savers = MakeSavers(**cluster, {});
  let_go = false;
  checkpoint::SetFaultHookForTesting(HoldFirstWrite);
  const absl::Status started = StartAll(**cluster, savers, root);
  // Every rank's writer reaches its first write and waits there.
  for (int i = 0; i < 500 && writers_held < (*cluster)->world(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const int held = writers_held.load();
  const absl::Status trained = (*cluster)->Train(1, 2);  // while the writes are held
  let_go = true;
  const absl::Status waited = WaitAll(**cluster, savers);
  checkpoint::SetFaultHookForTesting(nullptr);
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(held, (*cluster)->world()) << "Start returned only after its writes";
  ASSERT_TRUE(trained.ok()) << trained;
  ASSERT_TRUE(waited.ok()) << waited;
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "loaded");
}

// The snapshot's copy waits for the engine's work enqueued before Start,
// here the communication stream's, held: Start returns all the same, and
// the steps after it (whose update waits for the copy) do not change what
// is written.
TEST(AsyncSaver, StartReturnsBeforeTheSnapshotIsCopied) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("copy_held");
  Savers savers = MakeSavers(**cluster, {});
  std::atomic<bool> let_copy{false};
  std::vector<std::atomic<bool>> held_to_the_end(2);
  std::vector<int> returned_while_held(2);  // not vector<bool>: one int per thread
  const absl::Status started = AllOk((*cluster)->Run([&](int r) -> absl::Status {
    // Held until the test lets it go or 5 s pass.
    RETURN_IF_ERROR((*cluster)->engine(r).comm_stream()->Enqueue([&, r] {
      for (int i = 0; i < 500 && !let_copy; ++i) absl::SleepFor(absl::Milliseconds(10));
      held_to_the_end[r] = !let_copy;
    }));
    RETURN_IF_ERROR(savers[r]->Start(root));
    returned_while_held[r] = !let_copy && !held_to_the_end[r];
    return absl::OkStatus();
  }));
  let_copy = true;
  const absl::Status trained = (*cluster)->Train(1, 3);
  const absl::Status waited = WaitAll(**cluster, savers);
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_THAT(returned_while_held, ::testing::Each(1)) << "Start waited for the copy";
  ASSERT_TRUE(trained.ok()) << trained;
  ASSERT_TRUE(waited.ok()) << waited;
  ASSERT_NE(Hash(*(*cluster)->States()), Hash(at_save));
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "loaded");
}

// Trains step 0, starts a save through two 4 KiB buffers (the copy trails
// the writes, so training reaches its next update long before the copy
// ends), trains steps 1 and 2, and checks that the checkpoint holds the
// state at Start. The cluster, for more checks; null on failure.
std::unique_ptr<Cluster> SaveWhileTraining(const Model& model, const TrainingRun& run,
                                           const std::string& root) {
  auto cluster = Cluster::Create(model, run, AdamW());
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok() || !(*cluster)->Train(0, 1).ok()) return nullptr;
  const ModelStates at_save = *(*cluster)->States();
  Savers savers = MakeSavers(**cluster, {.snapshot_bytes = 2 * 4096, .write_bytes = 4096});
  const absl::Status started = StartAll(**cluster, savers, root);
  const absl::Status trained = (*cluster)->Train(1, 3);
  const absl::Status waited = WaitAll(**cluster, savers);
  EXPECT_TRUE(started.ok() && trained.ok() && waited.ok()) << started << trained << waited;
  ExpectStatesIdentical(at_save, LoadedStates(model, root), "loaded");
  return *std::move(cluster);
}

// offload_overlap steps each unit as its gradients arrive, during
// backward: those updates wait for the snapshot too.
TEST(AsyncSaver, EarlyUpdatesDuringBackwardWaitForTheSnapshot) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(2, 1);
  run.config.offload = Offload::kOptimizer;
  run.config.offload_overlap = true;
  std::unique_ptr<Cluster> cluster = SaveWhileTraining(*model, run, FreshDir("early_updates"));
  ASSERT_NE(cluster, nullptr);
  EXPECT_GT(cluster->engine(0).stats().early_unit_updates, 0);
}

// With the state on NVMe, Start copies on the training thread (only it
// streams the state file); the engine has no reader to wait for after.
TEST(AsyncSaver, StateOnNvmeIsCopiedByStart) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(2, 1);
  run.config.offload = Offload::kOptimizer;
  run.config.offload_device = OffloadDevice::kNvme;
  run.config.nvme_path = FreshDir("async_nvme_state");
  std::unique_ptr<Cluster> cluster = SaveWhileTraining(*model, run, FreshDir("async_nvme"));
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(cluster->engine(0).stats().owned_state_wait_seconds, 0.0);
}

// OwnedStateAccess::Guard: the calls that change owned state wait for the
// reader (released 200 ms later by another thread), and count the wait.
TEST(OwnedStateGuard, StepSetParamAndTheDestructorWaitForTheReader) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  auto guard_all = [&](std::atomic<bool>& released, absl::Duration hold) {
    auto reader = std::make_shared<std::promise<void>>();
    const std::shared_future<void> read = reader->get_future().share();
    for (int r = 0; r < 2; ++r) (*cluster)->engine(r).owned_state().Guard(read);
    return std::thread([reader, &released, hold] {
      absl::SleepFor(hold);
      released = true;
      reader->set_value();
    });
  };
  std::atomic<bool> step_released{false}, set_released{false}, destroy_released{false};
  // A second: forward and backward (which do not wait) take well under 0.7 s.
  std::thread releaser = guard_all(step_released, absl::Seconds(1));
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  EXPECT_TRUE(step_released) << "Step updated while the reader read";
  EXPECT_GT((*cluster)->engine(0).stats().owned_state_wait_seconds, 0.3) << "Step's wait";
  releaser.join();

  const std::vector<float> ones((*cluster)->engine(0).layout().params()[0].numel, 1.0f);
  const double waited_before = (*cluster)->engine(0).stats().owned_state_wait_seconds;
  releaser = guard_all(set_released, absl::Milliseconds(200));
  ASSERT_TRUE(AllOk((*cluster)->Run([&](int r) {
    return (*cluster)->engine(r).SetParam(0, ones);
  })).ok());
  EXPECT_TRUE(set_released) << "SetParam wrote while the reader read";
  EXPECT_GT((*cluster)->engine(0).stats().owned_state_wait_seconds, waited_before + 0.1);
  releaser.join();

  releaser = guard_all(destroy_released, absl::Milliseconds(200));
  cluster->reset();
  EXPECT_TRUE(destroy_released) << "the engine was destroyed while the reader read";
  releaser.join();
}

// A Load while a save's copy is under way (two 4 KiB buffers: it trails
// the writes) waits for the copy before it overwrites the state: the save
// holds the state at its Start, the engine the loaded checkpoint.
TEST(AsyncSaver, ALoadDuringTheSnapshotWaitsForIt) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string older = FreshDir("older"), root = FreshDir("load_during");
  ASSERT_TRUE(AllOk((*cluster)->Save(older)).ok());
  const ModelStates at_older = *(*cluster)->States();
  ASSERT_TRUE((*cluster)->Train(0, 2).ok());
  const ModelStates at_save = *(*cluster)->States();
  Savers savers = MakeSavers(**cluster, {.snapshot_bytes = 2 * 4096, .write_bytes = 4096});
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  ASSERT_TRUE(AllOk((*cluster)->Load(older)).ok());
  ASSERT_TRUE(WaitAll(**cluster, savers).ok());
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "saved");
  ExpectStatesIdentical(at_older, *(*cluster)->States(), "loaded");
}

TEST(AsyncSaver, NextStartWaitsForThePreviousSave) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string root = FreshDir("twice");
  Savers savers = MakeSavers(**cluster, {});
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates first = *(*cluster)->States();
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  ASSERT_TRUE((*cluster)->Train(1, 2).ok());
  const ModelStates second = *(*cluster)->States();
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());  // publishes the first
  ExpectStatesIdentical(first, LoadedStates(*model, root + "/step-1"), "first");
  ASSERT_TRUE(WaitAll(**cluster, savers).ok());
  ExpectStatesIdentical(second, LoadedStates(*model, root), "latest");
  EXPECT_EQ(savers[0]->Wait().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AsyncSaver, DestroyedBeforeWaitPublishesNothing) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string root = FreshDir("dropped");
  ASSERT_TRUE(AllOk((*cluster)->Save(root)).ok());
  const ModelStates saved = *(*cluster)->States();
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  {
    Savers savers = MakeSavers(**cluster, {});
    ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  }
  ExpectStatesIdentical(saved, LoadedStates(*model, root), "latest");
}

// publish_when_written: the save is published while nobody calls Wait (the
// ranks go on training), loads as the state at Start, and Wait returns its
// folder; the next save deletes nothing of it.
TEST(AsyncSaver, PublishWhenWrittenPublishesWithoutWait) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("published_when_written");
  Savers savers = MakeSavers(**cluster, {.publish_when_written = true});
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  ASSERT_TRUE((*cluster)->Train(1, 2).ok());  // no Wait meanwhile
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!checkpoint::FileExists(root + "/latest") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "published before Wait");
  const std::vector<absl::Status> waited = (*cluster)->Run([&](int r) {
    absl::StatusOr<std::string> folder = savers[r]->Wait();
    if (!folder.ok()) return folder.status();
    return *folder == root + "/step-1" ? absl::OkStatus() : absl::InternalError(*folder);
  });
  EXPECT_TRUE(AllOk(waited).ok()) << AllOk(waited);
}

// Under hybrid sharding only the first replica group writes (and leaves
// records); rank 0 publishes once those two are there, and the save loads
// into a plain cluster as the state at Start.
TEST(AsyncSaver, PublishWhenWrittenUnderHybridSharding) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(4, 1);
  run.ranks_per_node = 2;
  run.config.shard_group_size = 2;
  auto cluster = Cluster::Create(*model, run, AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  const ModelStates at_save = *(*cluster)->States();
  const std::string root = FreshDir("hybrid_published");
  Savers savers = MakeSavers(**cluster, {.publish_when_written = true});
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  const absl::Status waited = WaitAll(**cluster, savers);
  ASSERT_TRUE(waited.ok()) << waited;
  EXPECT_TRUE(checkpoint::FileExists(root + "/step-1/rank-00001-of-00002.bin.record"));
  EXPECT_FALSE(checkpoint::FileExists(root + "/step-1/rank-00003-of-00004.bin.record"));
  ExpectStatesIdentical(at_save, LoadedStates(*model, root), "published, hybrid");
}

// A rank whose file cannot be written leaves that in its record: rank 0
// publishes nothing, and Wait gives the error on every rank with `latest`
// still at the save before.
absl::Status FailRankOnesData(checkpoint::FileOp op, std::string_view path) {
  if (op == checkpoint::FileOp::kWrite &&
      path.find("rank-00001-of-00002.bin") != std::string_view::npos &&
      path.find(".record") == std::string_view::npos) {
    return absl::ResourceExhaustedError("no space left (injected)");
  }
  return absl::OkStatus();
}

TEST(AsyncSaver, PublishWhenWrittenPublishesNothingWhenARankFails) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string root = FreshDir("publish_fails");
  ASSERT_TRUE(AllOk((*cluster)->Save(root)).ok());
  const ModelStates saved = *(*cluster)->States();
  ASSERT_TRUE((*cluster)->Train(0, 1).ok());
  Savers savers = MakeSavers(**cluster, {.publish_when_written = true});
  checkpoint::SetFaultHookForTesting(&FailRankOnesData);
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  const std::vector<absl::Status> waited =
      (*cluster)->Run([&](int r) { return savers[r]->Wait().status(); });
  checkpoint::SetFaultHookForTesting(nullptr);
  for (const absl::Status& s : waited) {
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("injected"));
  }
  ExpectStatesIdentical(saved, LoadedStates(*model, root), "latest");
}

// A rank whose record never comes (here: it cannot be created) holds rank
// 0's publisher no longer than publish_timeout: Wait fails on every rank,
// naming the ranks that left none, and nothing is published.
absl::Status FailRankOnesRecord(checkpoint::FileOp op, std::string_view path) {
  if (op == checkpoint::FileOp::kCreate &&
      path.find("rank-00001-of-00002.bin.record") != std::string_view::npos) {
    return absl::ResourceExhaustedError("no space left (injected)");
  }
  return absl::OkStatus();
}

TEST(AsyncSaver, PublishWhenWrittenGivesUpOnAMissingRecord) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string root = FreshDir("publish_timeout");
  Savers savers = MakeSavers(**cluster, {.publish_when_written = true,
                                         .publish_timeout = absl::Milliseconds(300)});
  checkpoint::SetFaultHookForTesting(&FailRankOnesRecord);
  ASSERT_TRUE(StartAll(**cluster, savers, root).ok());
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> waited =
      (*cluster)->Run([&](int r) { return savers[r]->Wait().status(); });
  checkpoint::SetFaultHookForTesting(nullptr);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  for (const absl::Status& s : waited) EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(waited[0].message()), HasSubstr("1 of 2 ranks left no record"));
  EXPECT_FALSE(checkpoint::FileExists(root + "/latest"));
}

TEST(AsyncSaver, UnwritableRootFailsOnEveryRank) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string file = FreshDir("not_a_folder") + "/file";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  Savers savers = MakeSavers(**cluster, {});
  const std::vector<absl::Status> statuses =
      (*cluster)->Run([&](int r) { return savers[r]->Start(file + "/root"); });
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr(file));
  }
}

// A root this process may not write into (EACCES; root, which writes
// anywhere, without that override): every rank says so, naming it.
TEST(AsyncSaver, ARootThatIsNotWritableFailsOnEveryRank) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  const std::string root = FreshDir("read_only_root");
  ASSERT_EQ(chmod(root.c_str(), 0555), 0);
  Savers savers = MakeSavers(**cluster, {});
  (void)absl::ErrnoToStatus(EACCES, "warm-up");  // abseil's strerror table, before the threads
  std::vector<absl::Status> statuses;
  {
    WithoutPermissionOverride guard;
    if (!WithoutPermissionOverride::Refused(root)) {
      GTEST_SKIP() << "this process writes into a 0555 folder (permissions not enforced here)";
    }
    statuses = (*cluster)->Run([&](int r) { return savers[r]->Start(root); });
  }
  for (const absl::Status& s : statuses) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr(root));
    EXPECT_THAT(s.message(), HasSubstr("Permission denied"));
  }
}

// A rank that cannot take part in a save's agreement (its device pool is
// full: no buffer for the collective) aborts the group, so its peer fails
// at once instead of waiting out the 20 s timeout in the collective (or,
// on NCCL, pairing it with the rank's next one).
TEST(AsyncSaver, ARankThatCannotTakePartFailsItsPeerAtOnce) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  checkpoint::Participant full = (*cluster)->participant(1);
  DevicePool& pool = full.devices.pool(full.engine.stream()->device());
  std::vector<std::pair<void*, size_t>> held;
  for (size_t bytes : {size_t{1} << 20, size_t{512}}) {
    for (absl::StatusOr<void*> p = pool.Allocate(bytes); p.ok(); p = pool.Allocate(bytes)) {
      held.emplace_back(*p, bytes);
    }
  }
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> statuses = (*cluster)->Save(FreshDir("full_pool"));
  const absl::Duration took = absl::Now() - start;
  for (const absl::Status& s : statuses) EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(statuses[1])) << statuses[1];
  EXPECT_LT(took, absl::Seconds(10)) << "the peer waited for the collective's timeout";
  for (const auto& [p, bytes] : held) ASSERT_TRUE(pool.Deallocate(p, bytes).ok());
}

// With offload_overlap the owned state is stepped on a worker from the
// last micro-batch's backward until Step: a snapshot then would mix old
// and new units yet pass every CRC. Refused on every rank, and the save
// after Step goes through.
TEST(AsyncSaver, AStartBetweenBackwardAndStepIsRefused) {
  const std::unique_ptr<Model> model = SmallTransformer();
  TrainingRun run = SmallRun(2, 2);
  run.config.offload = Offload::kOptimizer;
  run.config.offload_overlap = true;
  auto cluster = Cluster::Create(*model, run, AdamW());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string root = FreshDir("mid_step");
  auto backward = [&](int r) -> absl::Status {
    Engine& engine = (*cluster)->engine(r);
    const std::vector<ParamSlot>& params = engine.layout().params();
    for (int id = static_cast<int>(params.size()) - 1; id >= 0; --id) {
      absl::Status added = engine.AddGrad(id, std::vector<float>(params[id].numel, 0.01f));
      if (!added.ok()) return added;
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(AllOk((*cluster)->Run(backward)).ok());
  for (const absl::Status& s : (*cluster)->Save(root)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("a checkpoint between backward and Step"));
  }
  ASSERT_TRUE(AllOk((*cluster)->Run([&](int r) { return (*cluster)->engine(r).Step(); })).ok());
  EXPECT_TRUE(AllOk((*cluster)->Save(root)).ok());
}

// A write size past 1 GiB (SIZE_MAX rounded up to 0 bytes, then divided
// by) is refused by name.
TEST(AsyncSaver, AnAbsurdWriteSizeIsRefused) {
  const std::unique_ptr<Model> model = SmallTransformer();
  auto cluster = Cluster::Create(*model, SmallRun(2, 1), AdamW());
  ASSERT_TRUE(cluster.ok());
  for (const absl::Status& s :
       (*cluster)->Save(FreshDir("huge_writes"), {.write_bytes = ~size_t{0}})) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("write_bytes"));
  }
}

}  // namespace
}  // namespace zero::testing_model
