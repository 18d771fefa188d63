// The NCCL backend's waits on a non-blocking communicator (ncclInProgress),
// its teardown and its failure paths, over the fake NCCL table and fake card
// of nccl_fakes.h: runs everywhere.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/comm/nccl_fakes.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_communicator.h"
#include "zero/comm/nccl_sequence_check.h"

namespace zero::nccl {
namespace {

using ::testing::HasSubstr;

const char* NoLastError(ncclComm_t) { return ""; }
const char* SocketLastError(ncclComm_t) { return " socket to peer 10.0.0.2 closed\n"; }

TEST(NcclStatusTest, AppendsNcclsLastErrorWhenItHasText) {
  NcclApi api = FakeApi();
  EXPECT_TRUE(NcclStatus(api, ncclSuccess, "ncclAllReduce").ok());
  const absl::Status plain = NcclStatus(api, ncclSystemError, "ncclAllReduce");
  EXPECT_EQ(std::string(plain.message()), "ncclAllReduce: fake NCCL error (2)");
  api.GetLastError = NoLastError;
  EXPECT_EQ(NcclStatus(api, ncclSystemError, "ncclAllReduce"), plain);
  api.GetLastError = SocketLastError;
  const absl::Status detailed = NcclStatus(api, ncclRemoteError, "ncclAllReduce");
  EXPECT_TRUE(absl::IsInternal(detailed)) << detailed;
  EXPECT_EQ(std::string(detailed.message()),
            "ncclAllReduce: fake NCCL error (6); NCCL's last error: socket to peer 10.0.0.2 "
            "closed");
}

// The sequence check over host memory (copies are memcpy, the stream is
// always done), noting what the fake communicator said when the copy back
// was enqueued.
class HostSequenceCheck final : public NcclSequenceCheck {
 public:
  // `gathered` and `host`: Words(1) * world_size each.
  HostSequenceCheck(int world_size, uint64_t* gathered, uint64_t* host, const FakeComm* comm)
      : NcclSequenceCheck(0, world_size, 1, gathered, host), comm_(comm) {}

  int copies_back = 0;
  int polls_left_at_copy_back = 0;  // < 0: the communicator had said it was done
  cudaStream_t last_stream = reinterpret_cast<cudaStream_t>(0xdead);  // of the last copy

 protected:
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                         cudaStream_t stream) override {
    last_stream = stream;
    if (kind == cudaMemcpyDeviceToHost) {
      ++copies_back;
      polls_left_at_copy_back = comm_->in_progress_polls;
    }
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<bool> StreamDone(cudaStream_t) override { return true; }

 private:
  const FakeComm* const comm_;
};

class NcclLifecycleTest : public NcclFakeTest {
 protected:
  // The watchdog thread stays out of the way: only the calls poll.
  static NcclOptions Quiet(int check_every = 0) {
    return {.check_every = check_every,
            .check_timeout = absl::Seconds(10),
            .timeout = absl::Seconds(10),
            .poll_interval = absl::Hours(1)};
  }
  // A world of `ranks` fakes, of which rank 0 gets a communicator (with
  // `check` if given): the others never call.
  FakeComm& MakeFakes(int ranks) {
    for (int r = 0; r < ranks; ++r) {
      world_.comms.push_back(std::make_unique<FakeComm>());
      world_.comms.back()->rank = r;
    }
    world = &world_;
    return *world_.comms[0];
  }
  Communicator& RankZero(NcclOptions options, std::unique_ptr<NcclSequenceCheck> check = nullptr) {
    FakeComm* fake = world_.comms[0].get();
    comms_.push_back(WrapComm(&api_, Handle(fake), 0, static_cast<int>(world_.comms.size()),
                              std::make_unique<FakeCard>(fake, 0, -1), options, std::move(check)));
    return *comms_.back();
  }

  uint64_t gathered_[16] = {};
  uint64_t host_[16] = {};
};

// With a non-blocking communicator the check's all-gather answers
// ncclInProgress: the check waits until the communicator is done, then
// enqueues its copy back, instead of failing.
TEST_F(NcclLifecycleTest, SequenceCheckWaitsOutInProgressBeforeItsCopyBack) {
  FakeComm& fake = MakeFakes(1);
  auto check = std::make_unique<HostSequenceCheck>(1, gathered_, host_, &fake);
  HostSequenceCheck& seen = *check;
  Communicator& comm = RankZero(Quiet(1), std::move(check));
  fake.enqueue_in_progress = true;  // every call answers ncclInProgress
  fake.in_progress_polls = 3;
  const absl::Status status = comm.Barrier(nullptr);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(fake.enqueued, 2u);  // the check's all-gather, then the barrier
  EXPECT_EQ(seen.copies_back, 1);
  EXPECT_LT(seen.polls_left_at_copy_back, 0);
  EXPECT_EQ(fake.aborts, 0);
}

// The check's wait ends at its deadline like any call's.
TEST_F(NcclLifecycleTest, SequenceCheckInProgressForeverEndsAtItsTimeout) {
  FakeComm& fake = MakeFakes(1);
  auto check = std::make_unique<HostSequenceCheck>(1, gathered_, host_, &fake);
  HostSequenceCheck& seen = *check;
  NcclOptions options = Quiet(1);
  options.check_timeout = absl::Milliseconds(30);
  Communicator& comm = RankZero(options, std::move(check));
  fake.enqueue_in_progress = true;
  fake.in_progress_polls = 1 << 30;
  const absl::Status status = comm.Barrier(nullptr);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("ncclAllGather (sequence check) on rank 0"));
  EXPECT_EQ(fake.enqueued, 1u);  // the barrier never reached NCCL
  EXPECT_EQ(seen.copies_back, 0);
  EXPECT_EQ(comm.Barrier(nullptr), status);
  EXPECT_EQ(fake.aborts, 1);
}

// Rank 1 never issued a call (its slot of the exchange stays zero): the
// check fails naming the mismatch, and the communicator is aborted, not only
// marked failed, so its work in flight ends.
TEST_F(NcclLifecycleTest, FailedSequenceCheckAbortsTheCommunicator) {
  FakeComm& fake = MakeFakes(2);
  Communicator& comm =
      RankZero(Quiet(1), std::make_unique<HostSequenceCheck>(2, gathered_, host_, &fake));
  const absl::Status status = comm.Barrier(nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_EQ(fake.enqueued, 1u);  // the check's all-gather only
  EXPECT_EQ(comm.AsyncError(), status);
  EXPECT_EQ(comm.Barrier(nullptr), status);
  EXPECT_EQ(fake.aborts, 1);
}

// A stream on another card is this rank's InvalidArgument, and the sequence
// check still runs (the peers learn of it at once instead of at their
// check's timeout), on the rank's own card's default stream, not the
// foreign one (NCCL would launch on the wrong card).
TEST_F(NcclLifecycleTest, TheCheckOfARefusedStreamRunsOnTheRanksOwnCard) {
  FakeComm& fake = MakeFakes(1);
  auto owned = std::make_unique<HostSequenceCheck>(1, gathered_, host_, &fake);
  HostSequenceCheck* check = owned.get();
  comms_.push_back(WrapComm(&api_, Handle(&fake), 0, 1, std::make_unique<FakeCard>(&fake, 1, 3),
                            Quiet(1), std::move(owned)));
  HandleOnlyStream foreign;  // on card 3; the rank is on card 1
  const absl::Status status = comms_[0]->Barrier(&foreign);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(fake.enqueued, 1u) << "the check's all-gather, and nothing else";
  EXPECT_EQ(check->last_stream, nullptr) << "the check ran on the foreign card's stream";
}

// One thread drives two ranks inside a group; with non-blocking
// communicators ncclGroupEnd answers ncclInProgress, and GroupEnd returns
// only once every communicator of the group said it is done (an inner
// group's end launches nothing, so waits for none).
TEST_F(NcclLifecycleTest, GroupEndWaitsForEveryCommunicatorOfTheGroup) {
  MakeWorld(2, Quiet());
  world_.group_end = ncclInProgress;
  ASSERT_TRUE(GroupStart(api_).ok());
  ASSERT_TRUE(GroupStart(api_).ok());
  for (auto& comm : comms_) ASSERT_TRUE(comm->Barrier(nullptr).ok());
  for (auto& fake : world_.comms) fake->in_progress_polls = 3;
  ASSERT_TRUE(GroupEnd(api_).ok());
  EXPECT_EQ(world_.comms[0]->in_progress_polls, 3);
  const absl::Status status = GroupEnd(api_);
  EXPECT_TRUE(status.ok()) << status;
  for (auto& fake : world_.comms) {
    EXPECT_LT(fake->in_progress_polls, 0);
    EXPECT_EQ(fake->aborts, 0);
  }
}

TEST_F(NcclLifecycleTest, GroupEndInProgressForeverTimesOutAndAbortsThatCommunicator) {
  NcclOptions options = Quiet();
  options.timeout = absl::Milliseconds(30);
  MakeWorld(2, options);
  world_.group_end = ncclInProgress;
  ASSERT_TRUE(GroupStart(api_).ok());
  for (auto& comm : comms_) ASSERT_TRUE(comm->Barrier(nullptr).ok());
  world_.comms[1]->in_progress_polls = 1 << 30;  // its peers never come
  const absl::Status status = GroupEnd(api_);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("ncclGroupEnd on rank 1"));
  EXPECT_EQ(world_.comms[0]->aborts, 0);
  EXPECT_EQ(world_.comms[1]->aborts, 1);
  EXPECT_EQ(comms_[1]->AsyncError(), status);
}

// A healthy communicator ends with ncclCommFinalize, waited out while it
// says ncclInProgress, and only then ncclCommDestroy.
TEST_F(NcclLifecycleTest, HealthyTeardownFinalizesWaitsThenDestroys) {
  FakeComm& fake = MakeFakes(1);
  RankZero(Quiet());
  ASSERT_TRUE(comms_[0]->Barrier(nullptr).ok());
  fake.finalize_result = ncclInProgress;
  fake.in_progress_polls = 3;
  comms_.clear();
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.destroys, 1);
  EXPECT_LT(fake.polls_left_at_destroy, 0);  // destroyed after it said done
  EXPECT_EQ(fake.aborts, 0);
}

// Older libraries have no ncclCommFinalize: destroyed at once.
TEST_F(NcclLifecycleTest, TeardownWithoutFinalizeDestroys) {
  NcclApi api = FakeApi();
  api.CommFinalize = nullptr;
  FakeComm& fake = MakeFakes(1);
  comms_.push_back(WrapComm(&api, Handle(&fake), 0, 1, std::make_unique<FakeCard>(&fake, 0, -1),
                            Quiet()));
  comms_.clear();
  EXPECT_EQ(fake.destroys, 1);
  EXPECT_EQ(fake.aborts, 0);
}

TEST_F(NcclLifecycleTest, FinalizeThatNeverEndsIsAbortedNotDestroyed) {
  NcclOptions options = Quiet();
  options.timeout = absl::Milliseconds(30);
  FakeComm& fake = MakeFakes(1);
  RankZero(options);
  fake.finalize_result = ncclInProgress;
  fake.in_progress_polls = 1 << 30;  // a peer never finalizes
  comms_.clear();
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

TEST_F(NcclLifecycleTest, FailedFinalizeIsAbortedNotDestroyed) {
  FakeComm& fake = MakeFakes(1);
  RankZero(Quiet());
  fake.finalize_result = ncclRemoteError;
  comms_.clear();
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

// A communicator that failed (here NCCL's asynchronous error, seen first at
// teardown) is aborted: neither finalized nor destroyed.
TEST_F(NcclLifecycleTest, FailedCommunicatorIsAbortedAtTeardown) {
  FakeComm& fake = MakeFakes(1);
  RankZero(Quiet());
  ASSERT_TRUE(comms_[0]->Barrier(nullptr).ok());
  fake.async = ncclSystemError;
  comms_.clear();
  EXPECT_EQ(fake.finalizes, 0);
  EXPECT_EQ(fake.destroys, 0);
  EXPECT_EQ(fake.aborts, 1);
}

absl::StatusOr<std::unique_ptr<NcclRankDevice>> AnyCard(int ordinal) {
  FakeComm* fake = world->comms[ordinal].get();
  return std::unique_ptr<NcclRankDevice>(std::make_unique<FakeCard>(fake, ordinal, -1));
}

// Without the sequence check (check_every = 0, the default) every rank is
// wrapped: no check is not an error.
TEST_F(NcclLifecycleTest, WrapMakesEveryRank) {
  MakeFakes(2);
  std::vector<ncclComm_t> handles;
  for (auto& fake : world_.comms) handles.push_back(Handle(fake.get()));
  const std::vector<int> cards = {0, 1};
  auto group = WrapComms(&api_, handles, 0, 2, cards, Quiet(), AnyCard);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->size(), 2u);
  EXPECT_EQ((*group)[1]->rank(), 1);
  EXPECT_EQ((*group)[1]->world_size(), 2);
  group->clear();
  for (auto& fake : world_.comms) EXPECT_EQ(fake->destroys, 1);
}

// Only card 0 can be used.
absl::StatusOr<std::unique_ptr<NcclRankDevice>> CardZeroOnly(int ordinal) {
  if (ordinal != 0) return absl::UnavailableError("CUDA card 1 is gone");
  FakeComm* fake = world->comms[0].get();
  return std::unique_ptr<NcclRankDevice>(std::make_unique<FakeCard>(fake, 0, -1));
}

// Rank 1's device cannot be made, so the group can never run: every comm is
// aborted (rank 0's, already wrapped, too); none is destroyed, since
// ncclCommDestroy could wait on the missing peer forever.
TEST_F(NcclLifecycleTest, WrapFailureAbortsEveryComm) {
  MakeFakes(3);
  std::vector<ncclComm_t> handles;
  for (auto& fake : world_.comms) handles.push_back(Handle(fake.get()));
  const std::vector<int> cards = {0, 1, 2};
  auto group = WrapComms(&api_, handles, 0, 3, cards, Quiet(), CardZeroOnly);
  EXPECT_TRUE(absl::IsUnavailable(group.status())) << group.status();
  for (auto& fake : world_.comms) {
    EXPECT_EQ(fake->aborts, 1) << "rank " << fake->rank;
    EXPECT_EQ(fake->finalizes, 0) << "rank " << fake->rank;
    EXPECT_EQ(fake->destroys, 0) << "rank " << fake->rank;
  }
}

}  // namespace
}  // namespace zero::nccl
