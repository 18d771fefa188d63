// The local backend's simulated link: the modelled time of a call, and a
// collective that takes at least that long, synchronous and stream-ordered.
// Wall time is only ever bounded from below.
#include "zero/comm/simulated_link.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "memory/host_stream.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing {
namespace {

TEST(SimulatedLinkTest, OffByDefault) {
  const SimulatedLink link;
  EXPECT_TRUE(link.off());
  EXPECT_EQ(link.TimeOf(CollectiveCall::AllGather(1 << 20, DType::kF32), 0, 8),
            absl::ZeroDuration());
}

TEST(SimulatedLinkTest, LatencyAloneIsPerCall) {
  const SimulatedLink link{.latency = absl::Milliseconds(3)};
  EXPECT_FALSE(link.off());
  EXPECT_EQ(link.TimeOf(CollectiveCall::Barrier(), 2, 4), absl::Milliseconds(3));
  EXPECT_EQ(link.TimeOf(CollectiveCall::AllReduce(1 << 20, DType::kBF16, ReduceOp::kSum), 0, 4),
            absl::Milliseconds(3));
}

// Ring-model bytes, the larger direction, over the bandwidth.
TEST(SimulatedLinkTest, BandwidthTimesTheRankRingBytes) {
  const SimulatedLink link{.latency = absl::Milliseconds(1), .bytes_per_second = 1e6};
  // (4 - 1) * 1000 f32 = 12000 bytes each way: 12 ms.
  EXPECT_EQ(link.TimeOf(CollectiveCall::AllGather(1000, DType::kF32), 1, 4),
            absl::Milliseconds(13));
  EXPECT_EQ(link.TimeOf(CollectiveCall::ReduceScatter(1000, DType::kF32, ReduceOp::kSum), 3, 4),
            absl::Milliseconds(13));
  // The root only sends, the others only receive: 1000 bf16 each.
  for (int rank : {0, 2}) {
    EXPECT_EQ(link.TimeOf(CollectiveCall::Broadcast(1000, DType::kBF16, 0), rank, 4),
              absl::Milliseconds(3));
  }
  // 2 * (count - own chunk): chunks of 1001 over 4 ranks are 251, 250, 250, 250.
  EXPECT_EQ(link.TimeOf(CollectiveCall::AllReduce(1001, DType::kF32, ReduceOp::kSum), 0, 4),
            absl::Milliseconds(1) + absl::Microseconds(2 * 750 * 4));
  // One rank moves nothing.
  EXPECT_EQ(link.TimeOf(CollectiveCall::AllGather(1000, DType::kF32), 0, 1), absl::Milliseconds(1));
}

TEST(SimulatedLinkTest, BadLinksAreRejectedByCreate) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const SimulatedLink& link :
       {SimulatedLink{.latency = absl::Milliseconds(-1)},
        SimulatedLink{.latency = absl::InfiniteDuration()}, SimulatedLink{.bytes_per_second = -1},
        SimulatedLink{.bytes_per_second = nan}, SimulatedLink{.bytes_per_second = inf},
        // Its times were infinite: a sleep nothing could end.
        SimulatedLink{.bytes_per_second = 1e-300}, SimulatedLink{.bytes_per_second = 0.5}}) {
    const absl::Status status = LocalGroup::Create(2, {.link = link}).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find("simulated link"), absl::string_view::npos) << status;
  }
}

constexpr int kWorld = 4;
constexpr size_t kCount = 250'000;  // f32 per rank: each rank gets 3 MB
const SimulatedLink kLink{.latency = absl::Milliseconds(20), .bytes_per_second = 200e6};

absl::Duration Since(std::chrono::steady_clock::time_point start) {
  return absl::FromChrono(std::chrono::steady_clock::now() - start);
}

// Every rank's all-gather lasts at least the link's time for it (35 ms),
// measured from its own call to its result, in both modes; results exact.
void ExpectTakesTheLinkTime(bool stream_ordered) {
  auto made = LocalGroup::Create(
      kWorld, {.timeout = absl::Seconds(60), .stream_ordered = stream_ordered, .link = kLink});
  ASSERT_TRUE(made.ok()) << made.status();
  Group group = std::move(made).value();
  std::vector<std::unique_ptr<HostStream>> streams;
  for (int r = 0; r < kWorld; ++r) streams.push_back(std::make_unique<HostStream>(r));
  const absl::Duration modelled =
      kLink.TimeOf(CollectiveCall::AllGather(kCount, DType::kF32), 0, kWorld);
  ASSERT_EQ(modelled, absl::Milliseconds(35));
  std::vector<Bytes> send, recv(kWorld, Bytes(kWorld * kCount * 4));
  Bytes expected;
  for (int r = 0; r < kWorld; ++r) {
    send.push_back(Pattern(DType::kF32, r, kCount));
    expected.insert(expected.end(), send[r].begin(), send[r].end());
  }
  std::vector<absl::Duration> took(kWorld);
  auto results = RunRanks(group, [&](int r, Communicator& comm) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status =
        comm.AllGather(send[r].data(), recv[r].data(), kCount, DType::kF32, streams[r].get());
    if (status.ok()) status = streams[r]->Synchronize();
    took[r] = Since(start);
    return status.ok() ? comm.AsyncError() : status;
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_GE(took[r], modelled) << "rank " << r;
    EXPECT_EQ(recv[r], expected) << "rank " << r;
  }
}

TEST(SimulatedLinkTest, SynchronousCallTakesAtLeastTheModelledTime) {
  ExpectTakesTheLinkTime(false);
}

TEST(SimulatedLinkTest, StreamOrderedCallTakesAtLeastTheModelledTime) {
  ExpectTakesTheLinkTime(true);
}

}  // namespace
}  // namespace zero::testing
