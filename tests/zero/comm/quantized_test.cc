// qwZ and qgZ over the local backend, one node and several: every rank
// reads the same values, sums follow the documented order exactly, the
// bytes across nodes shrink by the quantized width, and bad or mismatched
// settings fail every rank.
#include "zero/comm/quantized_collectives.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/status_macros.h"
#include "compute/quantize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "tests/zero/comm/comm_test_util.h"
#include "zero/comm/local_communicator.h"

namespace zero {
namespace {

using ::testing::HasSubstr;
using testing::Group;
using testing::RunRanks;
using Floats = std::vector<float>;

struct Shape {
  int nodes;
  int per_node;
  int world() const { return nodes * per_node; }
};

struct World {
  std::unique_ptr<DeviceSystem> devices;
  Group group;
};

World MakeWorld(const Shape& shape) {
  World w;
  w.devices = *DeviceSystem::Create({DeviceSpec::Kind::kHost, shape.world(), size_t{64} << 20});
  LocalGroupOptions options;
  options.ranks_per_node = shape.nodes > 1 ? shape.per_node : 0;
  options.devices = w.devices.get();
  options.timeout = absl::Seconds(20);
  w.group = *LocalGroup::Create(shape.world(), options);
  return w;
}

QuantizedCollective How(World& w, int rank, QuantFormat format) {
  return {format, w.devices->kind(), w.devices->default_stream(rank), &w.devices->pool(rank)};
}

Floats Gaussian(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0, 1);
  Floats x(n);
  for (float& v : x) v = d(gen);
  return x;
}

// What one chunk reads back as after quantization.
Floats RoundTrip(const float* x, size_t count, const QuantFormat& f, uint64_t index_base = 0) {
  std::vector<uint8_t> q(QuantizedBytes(count, f));
  QuantizeOnHost({DType::kF32, count, x, q.data(), f, index_base});
  Floats y(count);
  DequantizeSumOnHost({DType::kF32, count, 1, q.data(), y.data(), f});
  return y;
}

class QuantizedShapes : public ::testing::TestWithParam<std::tuple<Shape, int>> {};

TEST_P(QuantizedShapes, AllGatherGivesEveryRankTheSameReadBack) {
  const auto [shape, bits] = GetParam();
  const int n = shape.world();
  const size_t count = 300;
  const QuantFormat f{.bits = bits, .block = 64};
  World w = MakeWorld(shape);
  std::vector<Floats> in(n), out(n, Floats(n * count));
  for (int r = 0; r < n; ++r) in[r] = Gaussian(count, r);
  for (const absl::Status& s : RunRanks(w.group, [&](int r, Communicator& comm) -> absl::Status {
         RETURN_IF_ERROR(QuantizedAllGather(comm, in[r].data(), out[r].data(), count,
                                            DType::kF32, How(w, r, f)));
         return w.devices->default_stream(r)->Synchronize();
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int p = 0; p < n; ++p) {
    const Floats want = RoundTrip(in[p].data(), count, f);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(Floats(out[r].begin() + p * count, out[r].begin() + (p + 1) * count), want)
          << "rank " << r << " chunk " << p;
    }
  }
}

// The header's order, recomputed: rank order on one node; on several, each
// node's chunks in local rank order, read back after a second quantization
// (seed ~seed), then the nodes in order.
Floats ExpectedSum(const Shape& shape, const std::vector<Floats>& in, int rank, size_t count,
                   const QuantFormat& f) {
  auto chunk_of = [&](int p) {
    return RoundTrip(in[p].data() + rank * count, count, f, rank * count);
  };
  Floats total(count);
  if (shape.nodes == 1) {
    for (int p = 0; p < shape.world(); ++p) {
      const Floats y = chunk_of(p);
      for (size_t i = 0; i < count; ++i) total[i] = p == 0 ? y[i] : total[i] + y[i];
    }
    return total;
  }
  QuantFormat again = f;
  again.seed = ~f.seed;
  const int node_of_rank = rank / shape.per_node;
  for (int node = 0; node < shape.nodes; ++node) {
    Floats sum(count);
    for (int l = 0; l < shape.per_node; ++l) {
      const Floats y = chunk_of(node * shape.per_node + l);
      for (size_t i = 0; i < count; ++i) sum[i] = l == 0 ? y[i] : sum[i] + y[i];
    }
    const Floats y = RoundTrip(sum.data(), count, again, node_of_rank * count);
    for (size_t i = 0; i < count; ++i) total[i] = node == 0 ? y[i] : total[i] + y[i];
  }
  return total;
}

TEST_P(QuantizedShapes, ReduceScatterSumsReadBacksInTheStatedOrder) {
  const auto [shape, bits] = GetParam();
  const int n = shape.world();
  const size_t count = 150;
  for (bool stochastic : {false, true}) {
    const QuantFormat f{.bits = bits, .block = 32, .stochastic = stochastic, .seed = 5};
    World w = MakeWorld(shape);
    std::vector<Floats> in(n), out(n, Floats(count));
    for (int r = 0; r < n; ++r) in[r] = Gaussian(n * count, 100 + r);
    for (const absl::Status& s :
         RunRanks(w.group, [&](int r, Communicator& comm) -> absl::Status {
           RETURN_IF_ERROR(QuantizedReduceScatter(comm, in[r].data(), out[r].data(), count,
                                                  DType::kF32, How(w, r, f)));
           return w.devices->default_stream(r)->Synchronize();
         })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(out[r], ExpectedSum(shape, in, r, count, f))
          << "rank " << r << " stochastic " << stochastic;
      // And near the exact sum: each chunk off by at most half its scale.
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int p = 0; p < n; ++p) exact += in[p][r * count + i];
        ASSERT_NEAR(out[r][i], exact, n * (bits == 8 ? 0.1 : 2.0)) << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(NodesByRanksByBits, QuantizedShapes,
                         ::testing::Combine(::testing::Values(Shape{1, 4}, Shape{2, 2},
                                                              Shape{4, 2}),
                                            ::testing::Values(8, 4)));

// A mismatch that changes the bytes fails the collective on every rank; one
// that does not (the rounding mode) is the engine's to catch: it agrees on
// its configuration when it starts.

// 4 nodes of 2: int4 gradients cross at about 1/8 of fp32's bytes (plus
// scales), and the first quantization's loss is carried exactly.
TEST(QuantizedReduceScatter, CrossesFewerBytesAndFeedsErrorsBack) {
  const Shape shape{4, 2};
  const int n = shape.world();
  const size_t count = 2048;
  const QuantFormat f{.bits = 4, .block = 256};
  uint64_t plain_across = 0, quantized_across = 0;
  for (bool quantized : {false, true}) {
    World w = MakeWorld(shape);
    std::vector<Floats> in(n), out(n, Floats(count)), residual(n, Floats(n * count, 0.0f));
    for (int r = 0; r < n; ++r) in[r] = Gaussian(n * count, r);
    for (const absl::Status& s : RunRanks(w.group, [&](int r, Communicator& comm) {
           return quantized ? QuantizedReduceScatter(comm, in[r].data(), out[r].data(), count,
                                                     DType::kF32, How(w, r, f),
                                                     residual[r].data())
                            : comm.ReduceScatter(in[r].data(), out[r].data(), count,
                                                 DType::kF32, ReduceOp::kSum, nullptr);
         })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    (quantized ? quantized_across : plain_across) = w.group[0]->stats().across.sent;
    if (!quantized) continue;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(w.devices->default_stream(r)->Synchronize().ok());
      for (int p = 0; p < n; ++p) {
        const Floats y = RoundTrip(in[r].data() + p * count, count, f, p * count);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(residual[r][p * count + i], in[r][p * count + i] - y[i]) << r << " " << p;
        }
      }
    }
  }
  EXPECT_EQ(plain_across, 3 * count * 4);
  EXPECT_EQ(quantized_across, 3 * QuantizedBytes(count, f));
  EXPECT_LT(quantized_across * 7, plain_across);
}

TEST(QuantizedCollectives, BadOrMismatchedSettingsFailEveryRank) {
  const Shape shape{2, 2};
  World w = MakeWorld(shape);
  std::vector<Floats> in(4, Floats(4 * 64, 1.0f)), out(4, Floats(4 * 64));
  for (const absl::Status& s : RunRanks(w.group, [&](int r, Communicator& comm) {
         return QuantizedReduceScatter(comm, in[r].data(), out[r].data(), 64, DType::kF32,
                                       How(w, r, {.bits = 3}));
       })) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("unknown bit width 3"));
  }
  World fresh = MakeWorld(shape);
  const std::vector<absl::Status> results =
      RunRanks(fresh.group, [&](int r, Communicator& comm) {
        const QuantFormat f{.bits = 8, .block = r == 3 ? 16u : 64u};
        // 64 elements: 80 bytes in blocks of 16, 68 in blocks of 64.
        return QuantizedAllGather(comm, in[r].data(), out[r].data(), 64, DType::kF32,
                                  How(fresh, r, f));
      });
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(results[r].ok()) << "rank " << r;
}

}  // namespace
}  // namespace zero
