// Call descriptors, their validation, the traffic model and error wording.
#include "zero/comm/collective.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "zero/comm/internal/comm_errors.h"
#include "zero/comm/comm_stats.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

TEST(CollectiveCallTest, PrintsWhatRanksMustAgreeOn) {
  EXPECT_EQ(CollectiveCall::AllGather(1024, DType::kF32).ToString(), "AllGather(f32 x 1024)");
  EXPECT_EQ(CollectiveCall::ReduceScatter(256, DType::kBF16, ReduceOp::kAvg).ToString(),
            "ReduceScatter(bf16 x 256, avg)");
  EXPECT_EQ(CollectiveCall::AllReduce(8, DType::kF16, ReduceOp::kMax).ToString(),
            "AllReduce(f16 x 8, max)");
  EXPECT_EQ(CollectiveCall::Broadcast(4, DType::kF32, 2).ToString(), "Broadcast(f32 x 4, root 2)");
  EXPECT_EQ(CollectiveCall::Barrier().ToString(), "Barrier()");
}

TEST(CollectiveCallTest, EqualityIgnoresFieldsThatDoNotApply) {
  EXPECT_EQ(CollectiveCall::AllGather(4, DType::kF32), CollectiveCall::AllGather(4, DType::kF32));
  EXPECT_NE(CollectiveCall::AllGather(4, DType::kF32), CollectiveCall::AllGather(4, DType::kBF16));
  EXPECT_NE(CollectiveCall::AllReduce(4, DType::kF32, ReduceOp::kSum),
            CollectiveCall::AllReduce(4, DType::kF32, ReduceOp::kAvg));
}

TEST(ChunkTest, BalancedAndContiguous) {
  for (size_t count : {0, 1, 7, 8, 1001}) {
    for (int parts : {1, 3, 8}) {
      size_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const Chunk c = ChunkOf(count, parts, i);
        EXPECT_EQ(c.begin, next);
        EXPECT_LE(c.size, count / parts + 1);
        EXPECT_GE(c.size, count / parts);
        next += c.size;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(ValidateCallTest, AcceptsOrdinaryAndInPlaceCalls) {
  std::vector<float> buf(64);
  float* b = buf.data();
  EXPECT_TRUE(ValidateCall(CollectiveCall::AllGather(8, DType::kF32), b + 32, b, 0, 4).ok());
  EXPECT_TRUE(ValidateCall(CollectiveCall::AllGather(8, DType::kF32), b + 16, b, 2, 4).ok());
  EXPECT_TRUE(
      ValidateCall(CollectiveCall::ReduceScatter(8, DType::kF32, ReduceOp::kSum), b, b + 24, 3, 4)
          .ok());
  EXPECT_TRUE(
      ValidateCall(CollectiveCall::AllReduce(8, DType::kF32, ReduceOp::kSum), b, b, 0, 4).ok());
  EXPECT_TRUE(ValidateCall(CollectiveCall::Broadcast(8, DType::kF32, 1), nullptr, b, 0, 4).ok());
  EXPECT_TRUE(ValidateCall(CollectiveCall::Barrier(), nullptr, nullptr, 0, 4).ok());
  EXPECT_TRUE(ValidateCall(CollectiveCall::AllGather(0, DType::kF32), nullptr, nullptr, 0, 4).ok());
}

TEST(ValidateCallTest, RejectsBadArgumentsNamingCallAndRank) {
  std::vector<float> buf(64);
  float* b = buf.data();
  auto expect_invalid = [](const absl::Status& s, const std::string& words) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(words));
  };
  expect_invalid(ValidateCall(CollectiveCall::AllGather(8, DType::kF32), nullptr, b, 1, 4),
                 "AllGather(f32 x 8) on rank 1: send buffer is null");
  expect_invalid(
      ValidateCall(CollectiveCall::AllReduce(8, DType::kF32, ReduceOp::kSum), b, nullptr, 0, 4),
      "recv buffer is null");
  expect_invalid(ValidateCall(CollectiveCall::Broadcast(8, DType::kF32, 4), b, b, 0, 4),
                 "root 4 is outside [0, 4)");
  expect_invalid(ValidateCall(CollectiveCall::Broadcast(8, DType::kF32, 0), nullptr, b, 0, 4),
                 "send buffer is null");
  expect_invalid(ValidateCall(CollectiveCall::AllGather(8, static_cast<DType>(3)), b, b + 32, 0, 4),
                 "unknown dtype 3");
  expect_invalid(
      ValidateCall(CollectiveCall::AllReduce(8, DType::kF32, static_cast<ReduceOp>(3)), b, b, 0, 4),
      "unknown reduce op 3");
  // In place for all-gather is send == recv + rank*count, not send == recv.
  expect_invalid(ValidateCall(CollectiveCall::AllGather(8, DType::kF32), b, b, 1, 4), "overlap");
  expect_invalid(
      ValidateCall(CollectiveCall::ReduceScatter(8, DType::kF32, ReduceOp::kSum), b, b + 4, 0, 4),
      "overlap");
  expect_invalid(ValidateCall(CollectiveCall::AllGather(size_t{1} << 62, DType::kF32), b, b, 0, 4),
                 "overflows");
  // An all-to-all has no in-place form; apart, its buffers hold N chunks.
  expect_invalid(ValidateCall(CollectiveCall::AllToAll(8, DType::kF32), b, b, 0, 4), "overlap");
  expect_invalid(ValidateCall(CollectiveCall::AllToAll(8, DType::kF32), b, b + 31, 0, 4),
                 "overlap");
  EXPECT_TRUE(ValidateCall(CollectiveCall::AllToAll(8, DType::kF32), b, b + 32, 0, 4).ok());
}

TEST(RingTrafficTest, MatchesTheRingModel) {
  EXPECT_EQ(RingTraffic(CollectiveCall::AllGather(100, DType::kF32), 0, 4),
            (OpStats{1, 300, 300, 1200, 1200}));
  EXPECT_EQ(RingTraffic(CollectiveCall::ReduceScatter(100, DType::kBF16, ReduceOp::kSum), 3, 4),
            (OpStats{1, 300, 300, 600, 600}));
  // 10 elements over 4 ranks: chunks 3,3,2,2; 2 * (10 - own chunk).
  EXPECT_EQ(
      RingTraffic(CollectiveCall::AllReduce(10, DType::kF32, ReduceOp::kSum), 0, 4).elements_sent,
      14u);
  EXPECT_EQ(
      RingTraffic(CollectiveCall::AllReduce(10, DType::kF32, ReduceOp::kSum), 3, 4).elements_sent,
      16u);
  EXPECT_EQ(RingTraffic(CollectiveCall::Broadcast(10, DType::kF16, 1), 1, 4),
            (OpStats{1, 10, 0, 20, 0}));
  EXPECT_EQ(RingTraffic(CollectiveCall::Broadcast(10, DType::kF16, 1), 2, 4),
            (OpStats{1, 0, 10, 0, 20}));
  EXPECT_EQ(RingTraffic(CollectiveCall::AllReduce(10, DType::kF32, ReduceOp::kSum), 0, 1),
            OpStats{.calls = 1});
}

// The ZeRO paper's per-step volume for a model of psi elements on N ranks:
// stages 0-2 move 2 psi per rank, stage 3 3 psi (in the limit of large N).
TEST(RingTrafficTest, ReproducesZeroPaperVolumes) {
  constexpr int kN = 64;
  constexpr size_t kPsi = 64 * 1000;
  const uint64_t all_reduce =
      RingTraffic(CollectiveCall::AllReduce(kPsi, DType::kF16, ReduceOp::kSum), 0, kN)
          .elements_sent;
  const uint64_t rs =
      RingTraffic(CollectiveCall::ReduceScatter(kPsi / kN, DType::kF16, ReduceOp::kSum), 0, kN)
          .elements_sent;
  const uint64_t ag =
      RingTraffic(CollectiveCall::AllGather(kPsi / kN, DType::kF16), 0, kN).elements_sent;
  const double exact = 2.0 * kPsi * (kN - 1) / kN;
  EXPECT_DOUBLE_EQ(static_cast<double>(all_reduce), exact);         // stage 0
  EXPECT_DOUBLE_EQ(static_cast<double>(rs + ag), exact);            // stages 1-2
  EXPECT_DOUBLE_EQ(static_cast<double>(rs + 2 * ag), 1.5 * exact);  // stage 3: 3 psi
}

TEST(CommErrorsTest, RanksAreListedAsRanges) {
  EXPECT_EQ(RankList({3}), "rank 3");
  EXPECT_EQ(RankList({0, 1, 2, 5, 7, 8}), "ranks 0-2,5,7-8");
  EXPECT_EQ(GroupRanks({"A", "A", "B", "A"}), "ranks 0-1,3 A; rank 2 B");
}

TEST(CommErrorsTest, MismatchNamesEveryRanksCall) {
  std::vector<std::optional<CollectiveCall>> calls(4, CollectiveCall::AllGather(1024, DType::kF32));
  calls[3] = CollectiveCall::ReduceScatter(256, DType::kF32, ReduceOp::kSum);
  calls[1] = std::nullopt;
  const absl::Status s = MismatchError(17, calls);
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_EQ(s.message(),
            "collective #17 differs: ranks 0,2 AllGather(f32 x 1024); rank 1 not arrived; "
            "rank 3 ReduceScatter(f32 x 256, sum)");
}

}  // namespace
}  // namespace zero
