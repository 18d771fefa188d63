// The hierarchical communicator over the local backend: results in the
// documented order (local ranks, then nodes), bytes per level, and errors
// that reach every rank.
#include "zero/comm/hierarchical_communicator.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/status_macros.h"
#include "memory/device_system.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero {
namespace {

using ::testing::HasSubstr;
using testing::Bytes;
using testing::Decode;
using testing::Encode;
using testing::Group;
using testing::RunRanks;

struct Shape {
  int nodes;
  int per_node;
  int world() const { return nodes * per_node; }
};

std::unique_ptr<DeviceSystem> HostDevices(int count) {
  DeviceSpec spec;
  spec.kind = DeviceSpec::Kind::kHost;
  spec.count = count;
  spec.capacity = size_t{64} << 20;
  return *DeviceSystem::Create(spec);
}

Group MakeGroup(const Shape& shape, DeviceSystem* devices, bool hierarchical = true,
                bool stream_ordered = false) {
  LocalGroupOptions options;
  options.ranks_per_node = shape.per_node;
  options.devices = devices;
  options.hierarchical = hierarchical;
  options.stream_ordered = stream_ordered;
  options.timeout = absl::Seconds(20);
  return *LocalGroup::Create(shape.world(), options);
}

// Values whose sums depend on the order (magnitudes from 2^-12 to 2^12).
Bytes Noise(DType dtype, int rank, size_t count) {
  std::mt19937 gen(1234 + rank);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-12, 12);
  Bytes out(count * SizeOf(dtype));
  for (size_t i = 0; i < count; ++i) {
    Encode(dtype, std::ldexp(mantissa(gen), exponent(gen)), out.data() + i * SizeOf(dtype));
  }
  return out;
}

// The header's order: each node's ranks in fp32, rounded to the element
// type, then the node sums in fp32, rounded once.
float TwoLevelSum(DType dtype, const Shape& shape, const std::vector<Bytes>& in, size_t i) {
  const size_t e = SizeOf(dtype);
  uint8_t rounded[4];
  float total = 0;
  for (int n = 0; n < shape.nodes; ++n) {
    float node = 0;
    for (int l = 0; l < shape.per_node; ++l) {
      const float x = Decode(dtype, in[n * shape.per_node + l].data() + i * e);
      node = l == 0 ? x : node + x;
    }
    Encode(dtype, node, rounded);
    const float partial = Decode(dtype, rounded);
    total = n == 0 ? partial : total + partial;
  }
  Encode(dtype, total, rounded);
  return Decode(dtype, rounded);
}

float FlatSum(DType dtype, const std::vector<Bytes>& in, size_t i) {
  const size_t e = SizeOf(dtype);
  float acc = Decode(dtype, in[0].data() + i * e);
  for (size_t r = 1; r < in.size(); ++r) acc += Decode(dtype, in[r].data() + i * e);
  uint8_t rounded[4];
  Encode(dtype, acc, rounded);
  return Decode(dtype, rounded);
}

class HierarchicalShapes : public ::testing::TestWithParam<std::tuple<Shape, DType>> {};

TEST_P(HierarchicalShapes, ReductionsFollowTheTwoLevelOrderAndAgreeWithEachOther) {
  const auto [shape, dtype] = GetParam();
  const int n = shape.world();
  const size_t chunk = 37, count = chunk * n + 5;  // all-reduce: a tail of 5
  auto devices = HostDevices(n);
  Group group = MakeGroup(shape, devices.get());
  std::vector<Bytes> in(n), scattered(n), reduced(n);
  for (int r = 0; r < n; ++r) {
    in[r] = Noise(dtype, r, count);
    scattered[r].resize(chunk * SizeOf(dtype));
    reduced[r].resize(count * SizeOf(dtype));
  }
  for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
         RETURN_IF_ERROR(comm.ReduceScatter(in[r].data(), scattered[r].data(), chunk, dtype,
                                            ReduceOp::kSum, nullptr));
         return comm.AllReduce(in[r].data(), reduced[r].data(), count, dtype, ReduceOp::kSum,
                               nullptr);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  const size_t e = SizeOf(dtype);
  int differs_from_flat = 0;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const float want = TwoLevelSum(dtype, shape, in, i);
      ASSERT_EQ(Decode(dtype, reduced[r].data() + i * e), want) << "rank " << r << " @" << i;
      if (i >= r * chunk && i < (r + 1) * chunk) {
        // Stage 2's reduce-scatter gives stage 0's all-reduce bits.
        ASSERT_EQ(std::memcmp(scattered[r].data() + (i - r * chunk) * e,
                              reduced[r].data() + i * e, e),
                  0)
            << "rank " << r << " @" << i;
      }
      differs_from_flat += r == 0 && want != FlatSum(dtype, in, i);
    }
  }
  // The data do tell the orders apart, so the checks above can fail.
  EXPECT_GT(differs_from_flat, 0);
}

TEST_P(HierarchicalShapes, GatherAndBroadcastCopyExactly) {
  const auto [shape, dtype] = GetParam();
  const int n = shape.world();
  const size_t count = 29;
  auto devices = HostDevices(n);
  Group group = MakeGroup(shape, devices.get());
  std::vector<Bytes> in(n), gathered(n), broadcast(n);
  for (int r = 0; r < n; ++r) {
    in[r] = Noise(dtype, r, count);
    gathered[r].resize(n * count * SizeOf(dtype));
    broadcast[r].resize(count * SizeOf(dtype));
  }
  const int root = n - 2;  // not local rank 0, not node 0
  for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
         RETURN_IF_ERROR(comm.AllGather(in[r].data(), gathered[r].data(), count, dtype, nullptr));
         RETURN_IF_ERROR(comm.Barrier(nullptr));
         return comm.Broadcast(r == root ? in[r].data() : nullptr, broadcast[r].data(), count,
                               dtype, root, nullptr);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  const size_t bytes = count * SizeOf(dtype);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(std::memcmp(gathered[r].data() + p * bytes, in[p].data(), bytes), 0)
          << "rank " << r << " block " << p;
    }
    EXPECT_EQ(broadcast[r], in[root]) << "rank " << r;
  }
}

// Chunk p of rank r's send lands on rank p at r * count, flat or in two
// steps; across a node a flat all-to-all and the two steps send the same bytes.
TEST_P(HierarchicalShapes, AllToAllDeliversEachChunk) {
  const auto [shape, dtype] = GetParam();
  const int n = shape.world();
  const size_t count = 13, bytes = count * SizeOf(dtype);
  for (bool hierarchical : {true, false}) {
    auto devices = HostDevices(n);
    Group group = MakeGroup(shape, devices.get(), hierarchical);
    std::vector<Bytes> in(n), out(n, Bytes(n * bytes));
    for (int r = 0; r < n; ++r) in[r] = Noise(dtype, r, n * count);
    for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) {
           return comm.AllToAll(in[r].data(), out[r].data(), count, dtype, nullptr);
         })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        ASSERT_EQ(std::memcmp(out[r].data() + p * bytes, in[p].data() + r * bytes, bytes), 0)
            << "hierarchical " << hierarchical << " rank " << r << " from " << p;
      }
      const CommStats stats = group[r]->stats();
      EXPECT_EQ(stats.across.sent, (n - shape.per_node) * bytes) << "rank " << r;
      EXPECT_EQ(stats.across.received, (n - shape.per_node) * bytes) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    NodesByRanks, HierarchicalShapes,
    ::testing::Combine(::testing::Values(Shape{2, 2}, Shape{4, 2}, Shape{2, 3}),
                       ::testing::Values(DType::kF32, DType::kBF16)));

// An all-gather of c elements on M nodes of G: every rank sends (M-1)c
// across in two steps; a flat ring sends (N-1)c across on each node's last
// rank and nothing on the others.
TEST(HierarchicalLevels, EachByteCrossesOncePerRank) {
  const Shape shape{4, 2};
  const int n = shape.world();
  const size_t count = 1000, bytes = count * 4;
  for (bool hierarchical : {true, false}) {
    auto devices = HostDevices(n);
    Group group = MakeGroup(shape, devices.get(), hierarchical);
    std::vector<Bytes> in(n, Bytes(bytes)), out(n, Bytes(n * bytes));
    for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) {
           return comm.AllGather(in[r].data(), out[r].data(), count, DType::kF32, nullptr);
         })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < n; ++r) {
      const CommStats s = group[r]->stats();
      SCOPED_TRACE(::testing::Message() << "hierarchical " << hierarchical << " rank " << r);
      // The logical call is counted by the flat model either way.
      EXPECT_EQ(s[CollectiveKind::kAllGather].bytes_sent, (n - 1) * bytes);
      const bool boundary = r % shape.per_node == shape.per_node - 1;
      const uint64_t across = hierarchical ? (shape.nodes - 1) * bytes
                              : boundary   ? (n - 1) * bytes
                                           : 0;
      EXPECT_EQ(s.across.sent, across);
      const uint64_t inside = hierarchical
                                  ? shape.nodes * (shape.per_node - 1) * bytes
                                  : (n - 1) * bytes - across;
      EXPECT_EQ(s.inside.sent, inside);
    }
  }
}

TEST(HierarchicalStreams, StreamOrderedCallsGiveTheSameBits) {
  const Shape shape{2, 2};
  const int n = shape.world();
  const size_t count = 4 * 41;
  std::vector<Bytes> sync_out(n), async_out(n), in(n);
  for (int r = 0; r < n; ++r) in[r] = Noise(DType::kF32, r, count);
  for (bool ordered : {false, true}) {
    auto devices = HostDevices(n);
    Group group = MakeGroup(shape, devices.get(), true, ordered);
    std::vector<Bytes>& out = ordered ? async_out : sync_out;
    for (int r = 0; r < n; ++r) out[r].assign(count * 4, 0);
    for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) -> absl::Status {
           Stream* stream = devices->default_stream(r);
           RETURN_IF_ERROR(comm.AllReduce(in[r].data(), out[r].data(), count, DType::kF32,
                                          ReduceOp::kSum, stream));
           RETURN_IF_ERROR(stream->Synchronize());
           return comm.AsyncError();
         })) {
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  EXPECT_EQ(sync_out, async_out);
}

TEST(HierarchicalErrors, BadShapesAndMissingScratchAreRefused) {
  LocalGroupOptions options;
  options.ranks_per_node = 3;
  auto uneven = LocalGroup::Create(8, options);
  ASSERT_FALSE(uneven.ok());
  EXPECT_THAT(uneven.status().message(), HasSubstr("does not divide the world size 8"));
  options.ranks_per_node = 2;
  auto no_devices = LocalGroup::Create(8, options);
  ASSERT_FALSE(no_devices.ok());
  EXPECT_THAT(no_devices.status().message(), HasSubstr("needs LocalGroupOptions::devices"));

  auto devices = HostDevices(4);
  auto pieces = LocalGroup::Create(2);
  ASSERT_TRUE(pieces.ok());
  auto wrong = MakeHierarchicalCommunicator(*Topology::Create(4, 2), 1, std::move((*pieces)[0]),
                                            std::move((*pieces)[1]), &devices->pool(1));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("intra is rank 0 of 2"));
}

TEST(HierarchicalErrors, AvgIsRefusedOnEveryRank) {
  const Shape shape{2, 2};
  auto devices = HostDevices(4);
  Group group = MakeGroup(shape, devices.get());
  std::vector<Bytes> buf(4, Bytes(16));
  for (const absl::Status& s : RunRanks(group, [&](int r, Communicator& comm) {
         return comm.AllReduce(buf[r].data(), buf[r].data(), 4, DType::kF32, ReduceOp::kAvg,
                               nullptr);
       })) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("sum or max"));
  }
}

// One rank's bad call fails its peers on both levels instead of leaving
// them waiting for the timeout.
TEST(HierarchicalErrors, OneRanksBadCallFailsEveryRank) {
  const Shape shape{2, 2};
  auto devices = HostDevices(4);
  Group group = MakeGroup(shape, devices.get());
  std::vector<Bytes> in(4, Bytes(16)), out(4, Bytes(64));
  const absl::Time start = absl::Now();
  const std::vector<absl::Status> results = RunRanks(group, [&](int r, Communicator& comm) {
    return comm.AllGather(in[r].data(), r == 3 ? nullptr : out[r].data(), 4, DType::kF32,
                          nullptr);
  });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(results[3].code(), absl::StatusCode::kInvalidArgument);
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(results[r].ok()) << "rank " << r;
    EXPECT_FALSE(group[r]->AsyncError().ok()) << "rank " << r;
  }
}

}  // namespace
}  // namespace zero
