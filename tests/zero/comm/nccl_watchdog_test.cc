// The NCCL backend's watchdog, card checks and thread-per-rank pattern
// without a card: communicators over a fake NCCL table and a fake card
// (nccl_fakes.h).
#include <stdlib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/zero/comm/nccl_fakes.h"
#include "zero/comm/nccl_communicator.h"

namespace zero::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class NcclWatchdogTest : public NcclFakeTest {};

TEST_F(NcclWatchdogTest, TimeoutAbortsAndNamesRankAndCollective) {
  MakeWorld(2);  // rank 1 never calls
  Communicator& comm = *comms_[0];
  ASSERT_TRUE(comm.AllReduce(buffer_, buffer_, 8, DType::kF32, ReduceOp::kSum, nullptr).ok());
  const absl::Status failure = AwaitFailure(comm);
  EXPECT_TRUE(absl::IsDeadlineExceeded(failure)) << failure;
  EXPECT_THAT(failure.message(), AllOf(HasSubstr("rank 0"), HasSubstr("#1 AllReduce(f32 x 8")));
  EXPECT_EQ(world_.comms[0]->aborts, 1);
  EXPECT_EQ(comm.Barrier(nullptr),
            failure);  // later calls fail fast, NCCL untouched
  EXPECT_EQ(world_.comms[0]->enqueued, 1u);
  EXPECT_EQ(world_.comms[0]->aborts, 1);
}

// A call inside a group is launched by the outermost GroupEnd: watched from
// there, a grouped collective whose peer never comes times out as any other
// (an event recorded when the call was issued would precede it on the stream
// and say it finished).
TEST_F(NcclWatchdogTest, AGroupedCallIsWatchedFromItsGroupEnd) {
  MakeWorld(2);  // rank 1 never calls
  Communicator& comm = *comms_[0];
  ASSERT_TRUE(GroupStart(api_).ok());
  ASSERT_TRUE(comm.AllReduce(buffer_, buffer_, 8, DType::kF32, ReduceOp::kSum, nullptr).ok());
  absl::SleepFor(absl::Milliseconds(100));  // twice the timeout: not launched, not late
  EXPECT_TRUE(comm.AsyncError().ok()) << comm.AsyncError();
  ASSERT_TRUE(GroupEnd(api_).ok());
  EXPECT_EQ(world_.comms[0]->enqueued, 1u);
  const absl::Status failure = AwaitFailure(comm);
  EXPECT_TRUE(absl::IsDeadlineExceeded(failure)) << failure;
  EXPECT_THAT(failure.message(), AllOf(HasSubstr("rank 0"), HasSubstr("#1 AllReduce(f32 x 8")));
  EXPECT_EQ(world_.comms[0]->aborts, 1);
}

// Both ranks in one group on one thread: the grouped calls complete, and the
// watchdog, which watched them from GroupEnd, stays quiet past the timeout.
TEST_F(NcclWatchdogTest, GroupedCallsThatCompleteStayHealthy) {
  MakeWorld(2);
  ASSERT_TRUE(GroupStart(api_).ok());
  for (auto& comm : comms_) ASSERT_TRUE(comm->Barrier(nullptr).ok());
  ASSERT_TRUE(GroupEnd(api_).ok());
  absl::SleepFor(absl::Milliseconds(100));
  for (auto& comm : comms_) EXPECT_TRUE(comm->AsyncError().ok()) << comm->AsyncError();
  for (auto& fake : world_.comms) EXPECT_EQ(fake->aborts, 0);
}

TEST_F(NcclWatchdogTest, AsyncErrorAbortsAndIsReturned) {
  MakeWorld(1);
  Communicator& comm = *comms_[0];
  ASSERT_TRUE(comm.Barrier(nullptr).ok());
  world_.comms[0]->async = ncclSystemError;
  const absl::Status failure = AwaitFailure(comm);
  EXPECT_TRUE(absl::IsInternal(failure)) << failure;
  EXPECT_THAT(failure.message(), AllOf(HasSubstr("rank 0"), HasSubstr("fake NCCL error")));
  EXPECT_EQ(world_.comms[0]->aborts, 1);
  EXPECT_EQ(comm.Barrier(nullptr), failure);
}

TEST_F(NcclWatchdogTest, DestroyedWithWorkInFlightAbortsInsteadOfWaiting) {
  MakeWorld(2, {.timeout = absl::Seconds(30)});  // rank 1 never calls
  ASSERT_TRUE(comms_[0]->Barrier(nullptr).ok());
  comms_[0].reset();
  EXPECT_EQ(world_.comms[0]->aborts, 1);
}

// The markers (CUDA events on a card) are queried and destroyed with the
// rank's card current on every thread: the watchdog's, AsyncError's caller's,
// the rank's, the destroying one's.
TEST_F(NcclWatchdogTest, MarkersAreUsedWithTheRanksCardCurrent) {
  MakeWorld(2, {.timeout = absl::Seconds(30), .poll_interval = absl::Milliseconds(1)});
  ASSERT_TRUE(comms_[0]->Barrier(nullptr).ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (world_.marker_calls == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GT(world_.marker_calls, 0);  // the watchdog thread's polls
  EXPECT_EQ(world_.marker_calls_off_card, 0);
  ASSERT_TRUE(comms_[1]->Barrier(nullptr).ok());
  ASSERT_TRUE(comms_[1]->Barrier(nullptr).ok());  // rank 0 never joins this one
  EXPECT_TRUE(comms_[0]->AsyncError().ok());
  EXPECT_TRUE(comms_[1]->AsyncError().ok());
  comms_.clear();  // rank 1's last marker is still pending: destroyed now
  EXPECT_EQ(world_.marker_calls_off_card, 0);
}

TEST_F(NcclWatchdogTest, FinishedCollectivesNeverTimeOut) {
  MakeWorld(1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(comms_[0]->Barrier(nullptr).ok());
  absl::SleepFor(Fast().timeout * 3);
  EXPECT_TRUE(comms_[0]->AsyncError().ok()) << comms_[0]->AsyncError();
  EXPECT_EQ(world_.comms[0]->aborts, 0);
}

TEST_F(NcclWatchdogTest, StreamOnAnotherCardIsThisRanksInvalidArgument) {
  world_.comms.push_back(std::make_unique<FakeComm>());
  world = &world_;
  FakeComm* fake = world_.comms[0].get();
  comms_.push_back(
      WrapComm(&api_, Handle(fake), 0, 1, std::make_unique<FakeCard>(fake, 1, 3), Fast()));
  HandleOnlyStream stream;
  const absl::Status status = comms_[0]->Barrier(&stream);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("stream is on CUDA card 3, the rank's communicator on card 1"));
  EXPECT_EQ(fake->enqueued, 0u);
  EXPECT_FALSE(comms_[0]->AsyncError().ok());  // the rank left the group's sequence
}

// A card stream with a null handle is CUDA's legacy default stream (what
// PyTorch hands over by default): NCCL takes it; it was refused, and the
// refusal ended the rank's communicator.
TEST_F(NcclWatchdogTest, TheLegacyDefaultStreamOfACardIsTaken) {
  MakeWorld(1, Fast());
  HandleOnlyStream legacy(nullptr);
  const absl::Status status = comms_[0]->Barrier(&legacy);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(comms_[0]->AsyncError().ok()) << comms_[0]->AsyncError();
  EXPECT_TRUE(comms_[0]->Barrier(nullptr).ok());
}

// One process, several cards: a thread per rank, each driving its own
// communicator through a whole step, as engines do.
TEST_F(NcclWatchdogTest, ThreadPerRankRunsAndAStoppedRankFailsEveryPeer) {
  constexpr int kRanks = 4, kCalls = 20, kStopAt = 10;
  // Long enough that a slow thread (sanitizers, a busy machine) is not taken
  // for the stopped rank.
  MakeWorld(kRanks, {.timeout = absl::Milliseconds(500), .poll_interval = absl::Milliseconds(2)});
  std::vector<absl::Status> results(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *comms_[r];
      float send[4] = {}, gathered[4 * kRanks] = {};
      for (int i = 0; i < kCalls && results[r].ok(); ++i) {
        if (r == kRanks - 1 && i == kStopAt) return;  // this rank stops mid-step
        results[r] = i % 2 == 0
                         ? comm.AllGather(send, gathered, 4, DType::kF32, nullptr)
                         : comm.AllReduce(send, send, 4, DType::kBF16, ReduceOp::kAvg, nullptr);
      }
      if (results[r].ok()) results[r] = AwaitFailure(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks - 1; ++r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(results[r])) << results[r];
    EXPECT_THAT(results[r].message(),
                HasSubstr(absl::StrFormat("rank %d: collective #%d AllGather", r, kStopAt + 1)));
    EXPECT_EQ(world_.comms[r]->aborts, 1);
  }
  EXPECT_EQ(world_.comms[kRanks - 1]->enqueued, static_cast<uint64_t>(kStopAt));
}

TEST_F(NcclWatchdogTest, ThreadPerRankAllHealthyWhenEveryRankCalls) {
  constexpr int kRanks = 4, kCalls = 50;
  MakeWorld(kRanks, {.timeout = absl::Seconds(30), .poll_interval = absl::Milliseconds(2)});
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < kCalls && results[r].ok(); ++i) results[r] = comms_[r]->Barrier(nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_TRUE(comms_[r]->AsyncError().ok()) << comms_[r]->AsyncError();
    EXPECT_EQ(world_.comms[r]->aborts, 0);
  }
}

// A call NCCL answers with ncclInProgress (a non-blocking communicator still
// connecting) is waited for without the communicator's lock: an Abort from
// another thread ends the wait at once, not at the timeout.
TEST_F(NcclWatchdogTest, AbortEndsTheWaitOfACallStillInProgress) {
  MakeWorld(1, {.timeout = absl::Seconds(60), .poll_interval = absl::Milliseconds(2)});
  world_.comms[0]->enqueue_in_progress = true;
  world_.comms[0]->in_progress_polls = 1 << 30;
  absl::Status result;
  std::atomic<bool> done{false};
  const absl::Time start = absl::Now();
  std::thread caller([&] {
    result = comms_[0]->AllReduce(buffer_, buffer_, 8, DType::kF32, ReduceOp::kSum, nullptr);
    done = true;
  });
  while (world_.comms[0]->enqueued == 0) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(20));  // the caller is polling now
  EXPECT_FALSE(done);
  comms_[0]->Abort(absl::UnavailableError("peer 3 is gone"));
  caller.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(result)) << result;
  EXPECT_THAT(result.message(), HasSubstr("peer 3 is gone"));
  EXPECT_EQ(world_.comms[0]->aborts, 1);
}

absl::Status RunHere(int, absl::FunctionRef<absl::Status()> body) { return body(); }

TEST_F(NcclWatchdogTest, InitPollsWhileInProgress) {
  for (int r = 0; r < 2; ++r) world_.comms.push_back(std::make_unique<FakeComm>());
  world = &world_;
  world_.comms[1]->in_progress_polls = 3;
  const std::vector<int> cards = {0, 1};
  auto comms = InitComms(api_, ncclUniqueId{}, 0, 2, cards, absl::Seconds(10), RunHere);
  ASSERT_TRUE(comms.ok()) << comms.status();
  EXPECT_EQ((*comms)[1], Handle(world_.comms[1].get()));
  EXPECT_LT(world_.comms[1]->in_progress_polls, 0);  // polled until it said done
}

// NCCL_COMM_BLOCKING=1 would make every call able to block in the host,
// past the watchdog: refused, naming the variable, before any init starts.
TEST_F(NcclWatchdogTest, BlockingCommunicatorsAreRefused) {
  for (int r = 0; r < 2; ++r) world_.comms.push_back(std::make_unique<FakeComm>());
  world = &world_;
  const std::vector<int> cards = {0, 1};
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "1", 1), 0);
  auto refused = InitComms(api_, ncclUniqueId{}, 0, 2, cards, absl::Seconds(10), RunHere);
  ASSERT_EQ(setenv("NCCL_COMM_BLOCKING", "0", 1), 0);
  auto allowed = InitComms(api_, ncclUniqueId{}, 0, 2, cards, absl::Seconds(10), RunHere);
  unsetenv("NCCL_COMM_BLOCKING");
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("NCCL_COMM_BLOCKING=1"));
  EXPECT_TRUE(allowed.ok()) << allowed.status();
}

TEST_F(NcclWatchdogTest, InitTimesOutNamingTheRankAndAbortsEveryComm) {
  for (int r = 0; r < 2; ++r) world_.comms.push_back(std::make_unique<FakeComm>());
  world = &world_;
  world_.comms[1]->in_progress_polls = 1 << 30;  // its peers never come
  const std::vector<int> cards = {4, 5};
  auto comms = InitComms(api_, ncclUniqueId{}, 0, 2, cards, absl::Milliseconds(20), RunHere);
  EXPECT_TRUE(absl::IsDeadlineExceeded(comms.status())) << comms.status();
  EXPECT_THAT(comms.status().message(), HasSubstr("NCCL rank 1 of 2 on CUDA card 5"));
  EXPECT_EQ(world_.comms[0]->aborts, 1);
  EXPECT_EQ(world_.comms[1]->aborts, 1);
}

}  // namespace
}  // namespace zero::nccl
