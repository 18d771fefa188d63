// The local backend's stream-ordered mode (NCCL's contract on host
// streams): a call returns once enqueued, runs in stream order, reports
// failures through AsyncError(), and survives its communicator. Asynchrony
// is shown with gates that hold the streams, never with timing.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/host_stream.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing {
namespace {

constexpr size_t kCount = 1000;
constexpr size_t kBytes = kCount * sizeof(float);

// A group whose ranks each have `per_rank` host streams. The streams are
// declared first, so they outlive the communicators (and drain after them).
struct Ranks {
  std::vector<std::unique_ptr<HostStream>> streams;
  Group group;
  int per_rank = 1;

  Communicator& comm(int r) { return *group[r]; }
  Stream& stream(int r, int i = 0) { return *streams[r * per_rank + i]; }
  void SynchronizeAll() {
    for (auto& s : streams) EXPECT_TRUE(s->Synchronize().ok());
  }
};

Ranks MakeRanks(int world, absl::Duration timeout, int per_rank = 1) {
  Ranks ranks;
  ranks.per_rank = per_rank;
  // Delayed (memory/stream_delay.h), so the workers interleave differently.
  const HostStreamOptions delayed{.delay_seed = 11, .max_delay = absl::Microseconds(50)};
  for (int i = 0; i < world * per_rank; ++i) {
    ranks.streams.push_back(std::make_unique<HostStream>(i / per_rank, delayed, i % per_rank));
  }
  auto group = LocalGroup::Create(world, {.timeout = timeout, .stream_ordered = true});
  EXPECT_TRUE(group.ok()) << group.status();
  ranks.group = std::move(group).value();
  return ranks;
}

void HoldStream(Stream& stream, Gate& gate) {
  ASSERT_TRUE(stream.Enqueue([&gate] { gate.Wait(); }).ok());
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One thread drives all eight ranks, which only works if no call waits for
// its peers. Each stream is held, so when the calls return nothing has run;
// once released, the collective sees the fill enqueued before it and the
// copy enqueued after it sees the result.
TEST(LocalStreamOrderedTest, ReturnsOnceEnqueuedAndRunsInStreamOrder) {
  constexpr int kWorld = 8;
  // Short waits, so a call that blocks fails the test instead of hanging it.
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(5));
  Gate gate(std::chrono::seconds(5));
  const Bytes untouched(kBytes, 0xAB);
  std::vector<Bytes> send(kWorld, Bytes(kBytes, 0)), recv(kWorld, untouched),
      seen(kWorld, untouched), filled;
  for (int r = 0; r < kWorld; ++r) {
    Stream& stream = ranks.stream(r);
    HoldStream(stream, gate);
    ASSERT_TRUE(stream.Fill(send[r].data(), 0x40 + r, kBytes).ok());
    ASSERT_TRUE(
        ranks.comm(r)
            .AllReduce(send[r].data(), recv[r].data(), kCount, DType::kF32, ReduceOp::kSum, &stream)
            .ok());
    ASSERT_TRUE(stream.Copy(seen[r].data(), recv[r].data(), kBytes).ok());
    filled.push_back(Bytes(kBytes, 0x40 + r));
  }
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(recv[r], untouched) << "rank " << r << " ran before its stream got there";
    // Counted when enqueued; the bytes it moved only once it ran.
    EXPECT_EQ(ranks.comm(r).stats()[CollectiveKind::kAllReduce].calls, 1u);
    EXPECT_EQ(ranks.comm(r).stats().reduced_bytes, 0u);
  }
  gate.Open();
  ranks.SynchronizeAll();
  EXPECT_FALSE(gate.expired());
  const Bytes expected = Reference(DType::kF32, ReduceOp::kSum, filled, 0, kCount);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(ranks.comm(r).AsyncError().ok()) << ranks.comm(r).AsyncError();
    EXPECT_EQ(recv[r], expected) << "rank " << r;
    EXPECT_EQ(seen[r], expected) << "rank " << r;
    EXPECT_EQ(ranks.comm(r).stats().reduced_bytes, kBytes / kWorld);
  }
}

// Call #2 sits on stream B, #1 on stream A, with no event between them. B
// gets to #2 first (A is held): it must wait for the group to finish #1.
TEST(LocalStreamOrderedTest, CallsOnSeveralStreamsKeepTheirOrder) {
  constexpr int kWorld = 4;
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(60), /*per_rank=*/2);
  Gate gate;
  std::vector<Bytes> inputs, sums(kWorld, Bytes(kBytes)), gathered(kWorld, Bytes(kWorld * kBytes));
  Bytes all_inputs;
  for (int r = 0; r < kWorld; ++r) {
    inputs.push_back(Pattern(DType::kF32, r, kCount));
    all_inputs.insert(all_inputs.end(), inputs[r].begin(), inputs[r].end());
    HoldStream(ranks.stream(r, 0), gate);
    ASSERT_TRUE(ranks.comm(r)
                    .AllReduce(inputs[r].data(), sums[r].data(), kCount, DType::kF32,
                               ReduceOp::kSum, &ranks.stream(r, 0))
                    .ok());
    ASSERT_TRUE(ranks.comm(r)
                    .AllGather(inputs[r].data(), gathered[r].data(), kCount, DType::kF32,
                               &ranks.stream(r, 1))
                    .ok());
  }
  gate.Open();
  ranks.SynchronizeAll();
  const Bytes expected_sum = Reference(DType::kF32, ReduceOp::kSum, inputs, 0, kCount);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(ranks.comm(r).AsyncError().ok()) << ranks.comm(r).AsyncError();
    EXPECT_EQ(sums[r], expected_sum) << "rank " << r;
    EXPECT_EQ(gathered[r], all_inputs) << "rank " << r;
  }
}

TEST(LocalStreamOrderedTest, MismatchSurfacesThroughAsyncErrorAndLaterCallsFailFast) {
  constexpr int kWorld = 4;
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(60));
  std::vector<std::vector<float>> send(kWorld, std::vector<float>(4 * 1024)),
      recv(kWorld, std::vector<float>(4 * 1024));
  for (int r = 0; r < kWorld; ++r) {
    absl::Status enqueued =
        r == 3 ? ranks.comm(r).ReduceScatter(send[r].data(), recv[r].data(), 256, DType::kF32,
                                             ReduceOp::kSum, &ranks.stream(r))
               : ranks.comm(r).AllGather(send[r].data(), recv[r].data(), 1024, DType::kF32,
                                         &ranks.stream(r));
    EXPECT_TRUE(enqueued.ok()) << enqueued;  // found only when all four have arrived
  }
  ranks.SynchronizeAll();
  const absl::Status cause = ranks.comm(0).AsyncError();
  EXPECT_TRUE(absl::IsFailedPrecondition(cause)) << cause;
  EXPECT_EQ(std::string(cause.message()),
            "collective #1 differs: ranks 0-2 AllGather(f32 x 1024); "
            "rank 3 ReduceScatter(f32 x 256, sum)");
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(ranks.comm(r).AsyncError(), cause) << "rank " << r;
    EXPECT_EQ(ranks.comm(r).Barrier(&ranks.stream(r)), cause) << "rank " << r;
  }
}

// Driven from one thread in rank order, so who learns what when is fixed.
TEST(LocalStreamOrderedTest, AnInvalidCallFailsItsRankAtOnceAndThePeersOnTheirStreams) {
  constexpr int kWorld = 4;
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(60));
  std::vector<std::vector<float>> send(kWorld, std::vector<float>(8)),
      recv(kWorld, std::vector<float>(32));
  std::vector<absl::Status> enqueued;
  for (int r = 0; r < kWorld; ++r) {
    enqueued.push_back(ranks.comm(r).AllGather(r == 2 ? nullptr : send[r].data(), recv[r].data(), 8,
                                               DType::kF32, &ranks.stream(r)));
  }
  const std::string cause = "AllGather(f32 x 8) on rank 2: send buffer is null";
  EXPECT_TRUE(enqueued[0].ok() && enqueued[1].ok()) << enqueued[0] << enqueued[1];
  EXPECT_TRUE(absl::IsInvalidArgument(enqueued[2])) << enqueued[2];
  EXPECT_EQ(std::string(enqueued[2].message()), cause);
  EXPECT_EQ(std::string(enqueued[3].message()),
            "collective #1 failed on rank 2: " + cause);  // fails fast
  ranks.SynchronizeAll();
  for (int r = 0; r < kWorld; ++r) {
    const absl::Status status = ranks.comm(r).AsyncError();
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_EQ(std::string(status.message()), "collective #1 failed on rank 2: " + cause);
  }
}

TEST(LocalStreamOrderedTest, AbortReleasesWaitingStreams) {
  constexpr int kWorld = 4;
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(60));  // must not take the timeout
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(ranks.comm(r).Barrier(&ranks.stream(r)).ok());
  const absl::Status reason = absl::ResourceExhaustedError("rank 3 ran out of memory");
  ranks.comm(3).Abort(reason);
  ranks.SynchronizeAll();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(ranks.comm(r).AsyncError(), reason);
}

// Every rank issues #1; ranks 0-2 issue #2, which rank 3 either never calls
// or calls behind a held stream. Returns every rank's AsyncError().
std::vector<absl::Status> RunWithLateRank3(Ranks& ranks, Gate* rank3_gate) {
  std::vector<float> data(4 * 16, 1.0f);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(ranks.comm(r).Barrier(&ranks.stream(r)).ok());
  for (int r = 0; r < 4; ++r) {
    if (r == 3 && rank3_gate == nullptr) continue;
    if (r == 3) HoldStream(ranks.stream(r), *rank3_gate);
    float* mine = data.data() + r * 16;
    EXPECT_TRUE(ranks.comm(r)
                    .AllReduce(mine, mine, 16, DType::kF32, ReduceOp::kSum, &ranks.stream(r))
                    .ok());
  }
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(ranks.stream(r).Synchronize().ok());
  if (rank3_gate != nullptr) rank3_gate->Open();
  ranks.SynchronizeAll();
  std::vector<absl::Status> errors;
  for (int r = 0; r < 4; ++r) errors.push_back(ranks.comm(r).AsyncError());
  return errors;
}

TEST(LocalStreamOrderedTest, MissingRankTimesOutNamingItAndTheCall) {
  Ranks ranks = MakeRanks(4, absl::Milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<absl::Status> errors = RunWithLateRank3(ranks, nullptr);
  EXPECT_GE(SecondsSince(start), 0.19);
  for (const absl::Status& error : errors) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(error)) << error;
    EXPECT_EQ(std::string(error.message()),
              "collective #2 timed out after 200ms waiting for rank 3: ranks 0-2 waiting in #2 "
              "AllReduce(f32 x 16, sum); rank 3 last called #1 Barrier() (returned)");
  }
  EXPECT_EQ(ranks.comm(3).Barrier(&ranks.stream(3)), errors[0]);  // fails fast
}

// The rank did call; its stream had not got there. The message says so.
TEST(LocalStreamOrderedTest, TimeoutTellsAStuckStreamFromAMissingCall) {
  Ranks ranks = MakeRanks(4, absl::Milliseconds(200));
  Gate gate;
  const std::vector<absl::Status> errors = RunWithLateRank3(ranks, &gate);
  for (const absl::Status& error : errors) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(error)) << error;
    EXPECT_EQ(std::string(error.message()),
              "collective #2 timed out after 200ms waiting for rank 3: ranks 0-2 waiting in #2 "
              "AllReduce(f32 x 16, sum); rank 3 last called #1 Barrier() (returned), #2 "
              "enqueued but not reached by its stream");
  }
}

// The communicators go while their work is held on the streams: nothing
// waits for that work, which later fails fast against the rendezvous it
// keeps alive (ASan checks the "alive").
TEST(LocalStreamOrderedTest, DestroyingCommunicatorsWithWorkQueuedNeitherWaitsNorBreaks) {
  constexpr int kWorld = 4;
  Ranks ranks = MakeRanks(kWorld, absl::Seconds(60));
  Gate gate;
  const Bytes untouched(kBytes, 0xAB);
  std::vector<Bytes> send(kWorld, Bytes(kBytes, 1)), recv(kWorld, untouched);
  for (int r = 0; r < kWorld; ++r) {
    HoldStream(ranks.stream(r), gate);
    for (int call = 0; call < 3; ++call) {
      ASSERT_TRUE(ranks.comm(r)
                      .AllReduce(send[r].data(), recv[r].data(), kCount, DType::kF32,
                                 ReduceOp::kSum, &ranks.stream(r))
                      .ok());
    }
  }
  ranks.group[0].reset();
  const std::string left = "rank 0 left the group (its communicator was destroyed)";
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(std::string(ranks.comm(r).AsyncError().message()), left);
    EXPECT_EQ(std::string(ranks.comm(r).Barrier(&ranks.stream(r)).message()), left);
  }
  ranks.group.clear();
  gate.Open();
  ranks.SynchronizeAll();
  EXPECT_FALSE(gate.expired()) << "destruction waited for the held work";
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(recv[r], untouched) << "rank " << r;
}

// Meta streams run work at once, so the call runs on the calling thread:
// checks and counting as ever, no bytes.
TEST(LocalStreamOrderedTest, MetaStreamsRunTheCallInline) {
  constexpr int kWorld = 4;
  auto made = LocalGroup::Create(kWorld, {.has_bytes = false, .stream_ordered = true});
  ASSERT_TRUE(made.ok()) << made.status();
  Group group = std::move(made).value();
  std::vector<MetaStream> streams = {MetaStream(0), MetaStream(1), MetaStream(2), MetaStream(3)};
  std::vector<Bytes> send(kWorld, Bytes(kBytes, 1)), recv(kWorld, Bytes(kWorld * kBytes, 0xAB));
  auto results = RunRanks(group, [&](int r, Communicator& comm) {
    return comm.AllGather(send[r].data(), recv[r].data(), kCount, DType::kF32, &streams[r]);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_TRUE(group[r]->AsyncError().ok());
    EXPECT_EQ(recv[r], Bytes(kWorld * kBytes, 0xAB));
    EXPECT_EQ(group[r]->stats()[CollectiveKind::kAllGather].bytes_received, 3 * kBytes);
  }
}

// Stands for a card's stream: only is_card() matters here. Its handle may
// be null (CUDA's legacy default stream, as PyTorch's default stream is).
class FakeCardStream final : public Stream {
 public:
  explicit FakeCardStream(void* handle) : handle_(handle) {}
  int device() const override { return 0; }
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&>) override { return absl::OkStatus(); }
  absl::Status DoCopy(void*, const void*, size_t) override { return absl::OkStatus(); }
  absl::Status DoFill(void*, unsigned char, size_t) override { return absl::OkStatus(); }
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override {
    return absl::UnimplementedError("fake");
  }
  absl::Status DoWait(const std::shared_ptr<Event>&) override { return absl::OkStatus(); }
  absl::Status DoSynchronize() override { return absl::OkStatus(); }
  void* native_handle() const override { return handle_; }
  bool is_card() const override { return true; }

 private:
  void* const handle_;
};

TEST(LocalStreamOrderedTest, ACardStreamIsRejectedAndFailsThePeers) {
  int native = 0;
  for (void* handle : {static_cast<void*>(&native), static_cast<void*>(nullptr)}) {
    SCOPED_TRACE(handle == nullptr ? "the default stream" : "a created stream");
    Ranks ranks = MakeRanks(2, absl::Seconds(60));
    FakeCardStream card(handle);
    const absl::Status status = ranks.comm(0).Barrier(&card);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_EQ(std::string(status.message()),
              "Barrier() on rank 0: stream-ordered local collectives need a host or meta stream "
              "(on a card's stream a host callback would block waiting for the peers)");
    EXPECT_EQ(std::string(ranks.comm(1).AsyncError().message()),
              "collective #1 failed on rank 0: " + std::string(status.message()));
  }
}

}  // namespace
}  // namespace zero::testing
