// A fake NCCL table and a fake card, so that the NCCL backend's logic
// (watchdog, failure paths, teardown) runs in tests without a card. A fake
// collective finishes once every rank of the world enqueued it (as NCCL's
// would), unless the test stalls the world; the fake async error is whatever
// the test sets.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "zero/comm/nccl_communicator.h"

namespace zero::nccl {

struct FakeComm {
  int rank = 0;
  std::atomic<uint64_t> enqueued{0};
  std::atomic<ncclResult_t> async{ncclSuccess};
  std::atomic<int> in_progress_polls{0};  // GetAsyncError says ncclInProgress this often
  std::atomic<int> aborts{0};
  std::atomic<bool> enqueue_in_progress{false};  // calls answer ncclInProgress
  std::atomic<ncclResult_t> finalize_result{ncclSuccess};  // what ncclCommFinalize answers
  std::atomic<int> finalizes{0};
  std::atomic<int> destroys{0};
  std::atomic<int> polls_left_at_destroy{0};  // in_progress_polls then: < 0 when done
};

// The world the fake functions see (they are plain function pointers).
struct FakeWorld {
  std::vector<std::unique_ptr<FakeComm>> comms;
  std::atomic<bool> stalled{false};
  std::atomic<int> next_init{0};
  std::atomic<ncclResult_t> group_end{ncclSuccess};  // what ncclGroupEnd answers
  std::atomic<int> marker_calls{0};  // markers queried or destroyed
  std::atomic<int> marker_calls_off_card{0};  // ... without their card current
};
inline FakeWorld* world = nullptr;
// The card a FakeCard made current on this thread (-1: none).
inline thread_local int current_card = -1;

inline FakeComm* Fake(ncclComm_t comm) { return reinterpret_cast<FakeComm*>(comm); }
inline ncclComm_t Handle(FakeComm* comm) { return reinterpret_cast<ncclComm_t>(comm); }

// This thread's group nesting and the calls it holds back: as NCCL, a call
// inside a group is launched (counted as enqueued) by the outermost GroupEnd.
inline thread_local int group_depth = 0;
inline thread_local std::vector<FakeComm*> grouped_calls;

inline ncclResult_t Enqueue(ncclComm_t comm) {
  if (group_depth > 0) {
    grouped_calls.push_back(Fake(comm));
  } else {
    ++Fake(comm)->enqueued;
  }
  return Fake(comm)->enqueue_in_progress ? ncclInProgress : ncclSuccess;
}
inline ncclResult_t FakeAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                  ncclComm_t comm, cudaStream_t) {
  return Enqueue(comm);
}
inline ncclResult_t FakeAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t comm,
                                  cudaStream_t) {
  return Enqueue(comm);
}
inline ncclResult_t FakeGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  FakeComm& fake = *Fake(comm);
  *result = fake.in_progress_polls-- > 0 ? ncclInProgress : fake.async.load();
  return ncclSuccess;
}
inline ncclResult_t FakeAbort(ncclComm_t comm) {
  ++Fake(comm)->aborts;
  return ncclSuccess;
}
inline ncclResult_t FakeFinalize(ncclComm_t comm) {
  ++Fake(comm)->finalizes;
  return Fake(comm)->finalize_result;
}
inline ncclResult_t FakeDestroy(ncclComm_t comm) {
  ++Fake(comm)->destroys;
  Fake(comm)->polls_left_at_destroy = Fake(comm)->in_progress_polls.load();
  return ncclSuccess;
}
inline ncclResult_t FakeGroupStart() {
  ++group_depth;
  return ncclSuccess;
}
inline ncclResult_t FakeGroupEnd() {
  if (group_depth > 0 && --group_depth == 0) {
    for (FakeComm* comm : std::exchange(grouped_calls, {})) ++comm->enqueued;
  }
  return world != nullptr ? world->group_end.load() : ncclSuccess;
}
inline const char* FakeErrorString(ncclResult_t) { return "fake NCCL error"; }
inline ncclResult_t FakeInitRankConfig(ncclComm_t* comm, int, ncclUniqueId, int rank,
                                       ncclConfig_t* config) {
  EXPECT_EQ(config->blocking, 0);
  FakeComm& fake = *world->comms[rank];
  *comm = Handle(&fake);
  return ncclInProgress;
}

inline NcclApi FakeApi() {
  NcclApi api;
  api.version = 22809;
  api.AllReduce = FakeAllReduce;
  api.AllGather = FakeAllGather;
  api.CommGetAsyncError = FakeGetAsyncError;
  api.CommAbort = FakeAbort;
  api.CommFinalize = FakeFinalize;
  api.CommDestroy = FakeDestroy;
  api.GroupStart = FakeGroupStart;
  api.GroupEnd = FakeGroupEnd;
  api.GetErrorString = FakeErrorString;
  api.CommInitRankConfig = FakeInitRankConfig;
  return api;
}

// Done once every rank enqueued collective `seq` (1-based), as with NCCL.
// Counts the calls made without its card current (a real event's would
// create a context on card 0).
class FakeMarker final : public ProgressMarker {
 public:
  FakeMarker(uint64_t seq, int card) : seq_(seq), card_(card) {}
  ~FakeMarker() override { Count(); }
  absl::StatusOr<bool> Done() override {
    Count();
    if (world->stalled) return false;
    for (const auto& comm : world->comms) {
      if (comm->enqueued < seq_) return false;
    }
    return true;
  }

 private:
  void Count() const {
    if (world == nullptr) return;
    ++world->marker_calls;
    if (current_card != card_) ++world->marker_calls_off_card;
  }

  const uint64_t seq_;
  const int card_;
};

class FakeCard final : public NcclRankDevice {
 public:
  FakeCard(FakeComm* comm, int ordinal, int stream_ordinal)
      : comm_(comm), ordinal_(ordinal), stream_ordinal_(stream_ordinal) {}
  int ordinal() const override { return ordinal_; }
  int StreamOrdinal(cudaStream_t) const override { return stream_ordinal_; }
  absl::Status OnCard(absl::FunctionRef<absl::Status()> body) override {
    const int caller = current_card;
    current_card = ordinal_;
    absl::Status status = body();
    current_card = caller;
    return status;
  }
  absl::StatusOr<std::unique_ptr<ProgressMarker>> Mark(cudaStream_t) override {
    return std::make_unique<FakeMarker>(comm_->enqueued, ordinal_);
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
  // Null: a card's legacy default stream (CudaStream::Wrap of null).
  explicit HandleOnlyStream(void* handle = reinterpret_cast<void*>(0x1234)) : handle_(handle) {}
  int device() const override { return 0; }
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&>) override { return Unused(); }
  absl::Status DoCopy(void*, const void*, size_t) override { return Unused(); }
  absl::Status DoFill(void*, unsigned char, size_t) override { return Unused(); }
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override { return Unused(); }
  absl::Status DoWait(const std::shared_ptr<Event>&) override { return Unused(); }
  absl::Status DoSynchronize() override { return Unused(); }
  void* native_handle() const override { return handle_; }
  bool is_card() const override { return true; }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not a real stream"); }
  void* const handle_;
};

// Communicators over the fake table, one per rank of `world_`.
class NcclFakeTest : public ::testing::Test {
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

}  // namespace zero::nccl
