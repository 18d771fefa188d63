// The callback communicator's order (zero/comm/callback_communicator.h),
// over the C ABI's zero_collectives (zero/capi/collectives.h):
// a call on a host stream returns before its function runs and orders the
// stream's later work after it; every function runs in the order the calls
// were made, whichever stream each came on; a failure after return is the
// communicator's AsyncError.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "zero/capi/collectives.h"

namespace zero {
namespace {

using std::chrono::milliseconds;

// Functions of rank 0 of 2 that log each all-gather's count, wait for the
// gate, then put `send` in rank 0's part of `recv`.
struct Log {
  std::mutex mu;
  std::condition_variable opened;
  bool open = true;
  std::vector<size_t> counts;  // in the order the functions ran

  void Open() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    opened.notify_all();
  }
  size_t runs() {
    std::lock_guard lock(mu);
    return counts.size();
  }
};

zero_collectives Logging(Log* log, bool fail = false) {
  zero_collectives fns{};
  fns.size = sizeof fns;
  fns.user = log;
  fns.all_gather = fail ? [](const void*, void*, size_t, int, void*, void*) {
    zero_comm_set_error("the group is gone");
    return 5;
  } : [](const void* send, void* recv, size_t n, int, void* user, void*) {
    Log* log = static_cast<Log*>(user);
    std::unique_lock lock(log->mu);
    log->opened.wait(lock, [&] { return log->open; });
    log->counts.push_back(n);
    std::memcpy(recv, send, n * sizeof(float));
    return 0;
  };
  fns.reduce_scatter = [](const void*, void*, size_t, int, int, void*, void*) { return 0; };
  fns.all_reduce = fns.reduce_scatter;
  fns.broadcast = [](const void*, void*, size_t, int, int, void*, void*) { return 0; };
  fns.barrier = [](void* user, void*) {
    Log* log = static_cast<Log*>(user);
    std::lock_guard lock(log->mu);
    log->counts.push_back(0);
    return 0;
  };
  return fns;
}

std::unique_ptr<DeviceSystem> HostDevice() {
  return *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 16 << 20});
}

TEST(CallbackOrder, AHostStreamCallReturnsAtOnceAndOrdersTheStream) {
  auto system = HostDevice();
  Stream* stream = system->default_stream(0);
  Log log;
  log.open = false;
  auto comm = *capi::MakeCallbackCommunicator(0, 2, Logging(&log));
  const float send[4] = {1, 2, 3, 4};
  std::vector<float> recv(8, 0), seen(4, 0);
  const auto start = std::chrono::steady_clock::now();
  std::thread opener([&] {
    std::this_thread::sleep_for(milliseconds(1000));
    log.Open();
  });
  ASSERT_TRUE(comm->AllGather(send, recv.data(), 4, DType::kF32, stream).ok());
  const auto returned = std::chrono::steady_clock::now() - start;
  const size_t runs_at_return = log.runs();
  ASSERT_TRUE(stream->Copy(seen.data(), recv.data(), 4 * sizeof(float)).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  opener.join();
  EXPECT_LT(returned, milliseconds(500)) << "the caller waited for the function";
  EXPECT_EQ(runs_at_return, 0u);
  EXPECT_EQ(seen, std::vector<float>({1, 2, 3, 4})) << "the stream's copy ran before the call";
  EXPECT_TRUE(comm->AsyncError().ok());
}

// A card's stream, CUDA's default one (null handle) included: the call
// waits for it and runs the function before returning, never as a host
// callback on it (which would block the card's stream on torch's or NCCL's
// work). Counts what reaches it.
class FakeCardStream final : public Stream {
 public:
  int device() const override { return 0; }
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&>) override {
    ++enqueued;
    return absl::OkStatus();
  }
  absl::Status DoCopy(void*, const void*, size_t) override { return absl::OkStatus(); }
  absl::Status DoFill(void*, unsigned char, size_t) override { return absl::OkStatus(); }
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override {
    ++enqueued;
    return absl::UnimplementedError("not recorded on a card's stream");
  }
  absl::Status DoWait(const std::shared_ptr<Event>&) override { return absl::OkStatus(); }
  absl::Status DoSynchronize() override {
    ++synchronized;
    return fail_synchronize ? absl::InternalError("the card fell off the bus")
                            : absl::OkStatus();
  }
  bool is_card() const override { return true; }  // native_handle() stays null
  int enqueued = 0, synchronized = 0;
  bool fail_synchronize = false;
};

TEST(CallbackOrder, ACardsDefaultStreamIsWaitedForNotCalledBack) {
  Log log;
  auto comm = *capi::MakeCallbackCommunicator(0, 2, Logging(&log));
  FakeCardStream card;
  const float send[4] = {1, 2, 3, 4};
  std::vector<float> recv(8, 0);
  ASSERT_TRUE(comm->AllGather(send, recv.data(), 4, DType::kF32, &card).ok());
  EXPECT_EQ(log.runs(), 1u) << "the function ran before the call returned";
  EXPECT_EQ(card.synchronized, 1);
  EXPECT_EQ(card.enqueued, 0) << "a host callback (or event) on a card's stream";
  EXPECT_EQ(std::vector<float>(recv.begin(), recv.begin() + 4), std::vector<float>({1, 2, 3, 4}));
}

// A call whose stream cannot be waited for never reaches the process group:
// the communicator fails (the peers are told through abort) instead of
// pairing this rank's next call with the peers' current one.
TEST(CallbackOrder, AStreamThatCannotBeWaitedForFailsTheGroup) {
  Log log;
  zero_collectives fns = Logging(&log);
  static int aborts = 0;
  aborts = 0;
  fns.abort = [](const char*, void*) { ++aborts; };
  auto comm = *capi::MakeCallbackCommunicator(0, 2, fns);
  FakeCardStream card;
  card.fail_synchronize = true;
  std::vector<float> send(2), recv(4);
  const absl::Status first = comm->AllGather(send.data(), recv.data(), 2, DType::kF32, &card);
  EXPECT_TRUE(absl::IsInternal(first)) << first;
  EXPECT_EQ(aborts, 1) << "the peers were not told";
  EXPECT_EQ(comm->AsyncError(), first);
  card.fail_synchronize = false;
  EXPECT_EQ(comm->Barrier(&card), first);
  EXPECT_EQ(log.runs(), 0u) << "a later call reached the process group out of step";
}

TEST(CallbackOrder, FunctionsRunInTheOrderOfTheCalls) {
  auto system = HostDevice();
  Stream* slow = system->default_stream(0);
  Stream* quick = *system->CreateStream(0);
  Log log;
  auto comm = *capi::MakeCallbackCommunicator(0, 2, Logging(&log));
  // The first call's stream reaches it last.
  ASSERT_TRUE(slow->Enqueue([] { std::this_thread::sleep_for(milliseconds(200)); }).ok());
  std::vector<float> a(2, 1), b(4, 2), out_a(4), out_b(8);
  ASSERT_TRUE(comm->AllGather(a.data(), out_a.data(), 1, DType::kF32, slow).ok());
  ASSERT_TRUE(comm->AllGather(b.data(), out_b.data(), 2, DType::kF32, quick).ok());
  ASSERT_TRUE(comm->Barrier(nullptr).ok());  // no stream: returns when its function ran
  EXPECT_EQ(log.counts, std::vector<size_t>({1, 2, 0}));
  ASSERT_TRUE(slow->Synchronize().ok());
  ASSERT_TRUE(quick->Synchronize().ok());
}

TEST(CallbackOrder, AFailureAfterReturnIsTheAsyncErrorAndLaterCallsFailFast) {
  auto system = HostDevice();
  Stream* stream = system->default_stream(0);
  Log log;
  auto comm = *capi::MakeCallbackCommunicator(0, 2, Logging(&log, /*fail=*/true));
  std::vector<float> send(2), recv(4);
  ASSERT_TRUE(comm->AllGather(send.data(), recv.data(), 2, DType::kF32, stream).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  const absl::Status failed = comm->AsyncError();
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  EXPECT_NE(failed.message().find("the group is gone"), std::string::npos) << failed;
  EXPECT_EQ(comm->Barrier(nullptr), failed);
  EXPECT_EQ(log.runs(), 0u) << "the barrier's function was not called";
}

}  // namespace
}  // namespace zero
