// The local backend's stream path (zero/comm/internal/stream_mover.h): the
// bytes move as work on each rank's stream, as they must on a card. On
// delayed host streams (so a missing wait shows), every collective gives the
// bits of the host path (memcpy and HostReduce on the calling thread).
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/tag.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero::testing {
namespace {

constexpr int kWorld = 4;
constexpr size_t kCount = 1000;  // elements per rank's share

enum class Kind { kAllGather, kReduceScatter, kAllReduce, kAllReduceInPlace, kBroadcast };

struct Case {
  Kind kind;
  DType dtype;
  ReduceOp op = ReduceOp::kSum;
};

class LocalStreamMoverTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const HostStreamOptions delayed{.delay_seed = 5, .max_delay = absl::Microseconds(200)};
    auto devices = DeviceSystem::CreateWithHostStreams(
        {DeviceSpec::Kind::kHost, kWorld, size_t{64} << 20}, delayed);
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = *std::move(devices);
  }

  // Runs the case once through a group made with `options`; returns every
  // rank's recv bytes.
  std::vector<Bytes> Run(const Case& c, LocalGroupOptions options) {
    const size_t esize = SizeOf(c.dtype);
    const size_t send_elems = c.kind == Kind::kAllGather ? kCount : kWorld * kCount;
    const size_t recv_elems = c.kind == Kind::kReduceScatter ? kCount : kWorld * kCount;
    auto group = LocalGroup::Create(kWorld, options);
    EXPECT_TRUE(group.ok()) << group.status();
    std::vector<void*> send(kWorld), recv(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      Stream* stream = devices_->default_stream(r);
      send[r] = *devices_->pool(r).Allocate(send_elems * esize, Tag::kCommunication, stream);
      recv[r] = c.kind == Kind::kAllReduceInPlace
                    ? send[r]
                    : *devices_->pool(r).Allocate(recv_elems * esize, Tag::kCommunication, stream);
      // Values of many magnitudes, so another order of addition shows.
      std::mt19937 rng(100 + r);
      std::vector<float> values(send_elems);
      for (float& v : values) {
        v = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), (rng() % 40) - 20);
      }
      std::vector<uint8_t> encoded(send_elems * esize);
      for (size_t i = 0; i < send_elems; ++i) Encode(c.dtype, values[i], &encoded[i * esize]);
      std::memcpy(send[r], encoded.data(), encoded.size());
    }
    std::vector<absl::Status> status = RunRanks(*group, [&](int r, Communicator& comm) {
      Stream* stream = devices_->default_stream(r);
      switch (c.kind) {
        case Kind::kAllGather:
          return comm.AllGather(send[r], recv[r], kCount, c.dtype, stream);
        case Kind::kReduceScatter:
          return comm.ReduceScatter(send[r], recv[r], kCount, c.dtype, c.op, stream);
        case Kind::kAllReduce:
        case Kind::kAllReduceInPlace:
          return comm.AllReduce(send[r], recv[r], kWorld * kCount, c.dtype, c.op, stream);
        case Kind::kBroadcast:
          return comm.Broadcast(send[r], recv[r], kWorld * kCount, c.dtype, 2, stream);
      }
      return absl::OkStatus();
    });
    std::vector<Bytes> out(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      // Read at once on return: the synchronous contract says it is there.
      const auto* bytes = static_cast<const uint8_t*>(recv[r]);
      out[r].assign(bytes, bytes + recv_elems * esize);
      Stream* stream = devices_->default_stream(r);
      if (recv[r] != send[r]) {
        EXPECT_TRUE(devices_->pool(r).Deallocate(recv[r], recv_elems * esize, stream).ok());
      }
      EXPECT_TRUE(devices_->pool(r).Deallocate(send[r], send_elems * esize, stream).ok());
    }
    return out;
  }

  std::unique_ptr<DeviceSystem> devices_;
};

TEST_P(LocalStreamMoverTest, StreamPathGivesTheHostPathsBits) {
  const Case c = GetParam();
  const std::vector<Bytes> host = Run(c, {});
  const std::vector<Bytes> streams =
      Run(c, {.devices = devices_.get(), .move_on_streams = true});
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(host[r].size(), streams[r].size());
    EXPECT_TRUE(host[r] == streams[r]) << "rank " << r << " differs";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, LocalStreamMoverTest,
    ::testing::Values(Case{Kind::kAllGather, DType::kF32}, Case{Kind::kAllGather, DType::kBF16},
                      Case{Kind::kReduceScatter, DType::kF32},
                      Case{Kind::kReduceScatter, DType::kBF16},
                      Case{Kind::kReduceScatter, DType::kF16},
                      Case{Kind::kAllReduce, DType::kF32},
                      Case{Kind::kAllReduceInPlace, DType::kF32},
                      Case{Kind::kAllReduceInPlace, DType::kBF16},
                      Case{Kind::kAllReduce, DType::kF32, ReduceOp::kMax},
                      Case{Kind::kAllReduce, DType::kBF16, ReduceOp::kAvg},
                      Case{Kind::kBroadcast, DType::kF16}));

TEST(LocalStreamMoverOptionsTest, StreamPathWithoutDevicesFailsEveryRank) {
  auto devices = DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, size_t{8} << 20});
  ASSERT_TRUE(devices.ok());
  auto group = LocalGroup::Create(2, {.move_on_streams = true});
  ASSERT_TRUE(group.ok());
  std::vector<float> send(8, 1.0f), recv(8);
  std::vector<absl::Status> status = RunRanks(*group, [&](int r, Communicator& comm) {
    return comm.AllReduce(send.data(), recv.data(), 4, DType::kF32, ReduceOp::kSum,
                          (*devices)->default_stream(r));
  });
  for (const absl::Status& s : status) EXPECT_FALSE(s.ok());
  EXPECT_THAT(status[0].message(), ::testing::HasSubstr("LocalGroupOptions::devices"));
}

}  // namespace
}  // namespace zero::testing
