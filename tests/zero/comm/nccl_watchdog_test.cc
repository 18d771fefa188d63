// The NCCL backend's logic without a card: communicators over a fake NCCL
// table and a fake card. A fake collective finishes once every rank of the
// world enqueued it (as NCCL's would), unless the test stalls the world; the
// fake async error is whatever the test sets.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zero/comm/nccl_communicator.h"

namespace zero::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct FakeComm {
  int rank = 0;
  std::atomic<uint64_t> enqueued{0};
  std::atomic<ncclResult_t> async{ncclSuccess};
  std::atomic<int> in_progress_polls{0};  // GetAsyncError says ncclInProgress this often
  std::atomic<int> aborts{0};
  std::atomic<bool> enqueue_in_progress{false};  // calls answer ncclInProgress
};

// The world the fake functions see (they are plain function pointers).
struct FakeWorld {
  std::vector<std::unique_ptr<FakeComm>> comms;
  std::atomic<bool> stalled{false};
  std::atomic<int> next_init{0};
};
FakeWorld* world = nullptr;

FakeComm* Fake(ncclComm_t comm) { return reinterpret_cast<FakeComm*>(comm); }
ncclComm_t Handle(FakeComm* comm) { return reinterpret_cast<ncclComm_t>(comm); }

ncclResult_t Enqueue(ncclComm_t comm) {
  ++Fake(comm)->enqueued;
  return Fake(comm)->enqueue_in_progress ? ncclInProgress : ncclSuccess;
}
ncclResult_t FakeAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t) {
  return Enqueue(comm);
}
ncclResult_t FakeAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t comm,
                           cudaStream_t) {
  return Enqueue(comm);
}
ncclResult_t FakeGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  FakeComm& fake = *Fake(comm);
  *result = fake.in_progress_polls-- > 0 ? ncclInProgress : fake.async.load();
  return ncclSuccess;
}
ncclResult_t FakeAbort(ncclComm_t comm) {
  ++Fake(comm)->aborts;
  return ncclSuccess;
}
ncclResult_t FakeDestroy(ncclComm_t) { return ncclSuccess; }
ncclResult_t FakeGroup() { return ncclSuccess; }
const char* FakeErrorString(ncclResult_t) { return "fake NCCL error"; }
ncclResult_t FakeInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int rank,
                                ncclConfig_t* config) {
  EXPECT_EQ(config->blocking, 0);
  FakeComm& fake = *world->comms[rank];
  *comm = Handle(&fake);
  return ncclInProgress;
}

NcclApi FakeApi() {
  NcclApi api;
  api.version = 22809;
  api.AllReduce = FakeAllReduce;
  api.AllGather = FakeAllGather;
  api.CommGetAsyncError = FakeGetAsyncError;
  api.CommAbort = FakeAbort;
  api.CommDestroy = FakeDestroy;
  api.GroupStart = FakeGroup;
  api.GroupEnd = FakeGroup;
  api.GetErrorString = FakeErrorString;
  api.CommInitRankConfig = FakeInitRankConfig;
  return api;
}

// Done once every rank enqueued collective `seq` (1-based), as with NCCL.
class FakeMarker final : public ProgressMarker {
 public:
  explicit FakeMarker(uint64_t seq) : seq_(seq) {}
  absl::StatusOr<bool> Done() override {
    if (world->stalled) return false;
    for (const auto& comm : world->comms) {
      if (comm->enqueued < seq_) return false;
    }
    return true;
  }

 private:
  const uint64_t seq_;
};

class FakeCard final : public NcclRankDevice {
 public:
  FakeCard(FakeComm* comm, int ordinal, int stream_ordinal)
      : comm_(comm), ordinal_(ordinal), stream_ordinal_(stream_ordinal) {}
  int ordinal() const override { return ordinal_; }
  int StreamOrdinal(cudaStream_t) const override { return stream_ordinal_; }
  absl::Status OnCard(absl::FunctionRef<absl::Status()> body) override { return body(); }
  absl::StatusOr<std::unique_ptr<ProgressMarker>> Mark(cudaStream_t) override {
    return std::make_unique<FakeMarker>(comm_->enqueued);
  }
  float* scratch() override { return &scratch_; }

 private:
  FakeComm* const comm_;
  const int ordinal_;
  const int stream_ordinal_;
  float scratch_ = 0;
};

// A stream with a CUDA handle, for the card check; runs nothing.
class HandleOnlyStream final : public Stream {
 public:
  int device() const override { return 0; }
  absl::Status Enqueue(absl::AnyInvocable<void() &&>) override { return Unused(); }
  absl::Status Copy(void*, const void*, size_t) override { return Unused(); }
  absl::Status Fill(void*, unsigned char, size_t) override { return Unused(); }
  absl::StatusOr<std::shared_ptr<Event>> Record() override { return Unused(); }
  absl::Status Wait(const std::shared_ptr<Event>&) override { return Unused(); }
  absl::Status Synchronize() override { return Unused(); }
  void* native_handle() const override { return reinterpret_cast<void*>(0x1234); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not a real stream"); }
};

class NcclWatchdogTest : public ::testing::Test {
 protected:
  void MakeWorld(int ranks, NcclOptions options = Fast()) {
    for (int r = 0; r < ranks; ++r) {
      world_.comms.push_back(std::make_unique<FakeComm>());
      world_.comms.back()->rank = r;
    }
    world = &world_;
    for (int r = 0; r < ranks; ++r) {
      FakeComm* comm = world_.comms[r].get();
      comms_.push_back(WrapComm(&api_, Handle(comm), r, ranks,
                                std::make_unique<FakeCard>(comm, r, -1), options));
    }
  }
  static NcclOptions Fast() {
    return {.timeout = absl::Milliseconds(50), .poll_interval = absl::Milliseconds(2)};
  }
  // The watchdog thread ends a stuck rank by itself: no call needed.
  static absl::Status AwaitFailure(const Communicator& comm) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (comm.AsyncError().ok() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    return comm.AsyncError();
  }
  void TearDown() override {
    comms_.clear();
    world = nullptr;
  }

  const NcclApi api_ = FakeApi();
  FakeWorld world_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  float buffer_[64] = {};
};

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
