// Call histories: fingerprints, windows, and finding the first differing call
// (what the NCCL sequence check does on every rank after its all-gather).
#include "zero/comm/internal/call_history.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

const CollectiveCall kCalls[] = {
    CollectiveCall::AllGather(1024, DType::kF32),
    CollectiveCall::ReduceScatter(256, DType::kBF16, ReduceOp::kAvg),
    CollectiveCall::AllReduce(7, DType::kF16, ReduceOp::kMax),
    CollectiveCall::Broadcast(3, DType::kF32, 5),
    CollectiveCall::Barrier(),
};

TEST(PackTest, RoundTrips) {
  for (const CollectiveCall& call : kCalls) {
    for (bool valid : {true, false}) {
      bool got_valid = !valid;
      EXPECT_EQ(Unpack(Pack(call, valid), &got_valid), call);
      EXPECT_EQ(got_valid, valid);
    }
  }
}

TEST(CallHistoryTest, FingerprintDependsOnOrder) {
  CallHistory a, b;
  a.Record(kCalls[0]);
  a.Record(kCalls[1]);
  b.Record(kCalls[1]);
  b.Record(kCalls[0]);
  EXPECT_EQ(a.seq(), 2u);
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  CallHistory c;
  c.Record(kCalls[0]);
  c.Record(kCalls[1]);
  EXPECT_EQ(a.fingerprint(), c.fingerprint());
  EXPECT_EQ(*c.last(), kCalls[1]);
}

TEST(CallHistoryTest, WindowKeepsTheLastCalls) {
  CallHistory h(3);
  EXPECT_TRUE(h.Window().empty());
  for (const CollectiveCall& call : kCalls) h.Record(call);
  const std::vector<PackedCall> window = h.Window();
  ASSERT_EQ(window.size(), 3u);
  EXPECT_EQ(Unpack(window[0]), kCalls[2]);
  EXPECT_EQ(Unpack(window[2]), kCalls[4]);
}

TEST(CallHistoryTest, SerializeRoundTrips) {
  CallHistory h(4);
  h.Record(kCalls[0]);
  h.Record(kCalls[3]);
  const std::vector<uint64_t> words = Serialize(h, 4);
  ASSERT_EQ(words.size(), 10u);
  const HistorySummary s = Deserialize(words);
  EXPECT_EQ(s.seq, 2u);
  EXPECT_EQ(s.fingerprint, h.fingerprint());
  ASSERT_EQ(s.window.size(), 2u);
  EXPECT_EQ(Unpack(s.window[1]), kCalls[3]);
}

std::vector<HistorySummary> Summaries(const std::vector<std::vector<CollectiveCall>>& per_rank,
                                      size_t window) {
  std::vector<HistorySummary> out;
  for (const auto& calls : per_rank) {
    CallHistory h(window);
    for (const CollectiveCall& c : calls) h.Record(c);
    out.push_back(Deserialize(Serialize(h, window)));
  }
  return out;
}

TEST(CompareHistoriesTest, AgreeingRanksPass) {
  const std::vector<CollectiveCall> calls(kCalls, kCalls + 5);
  EXPECT_TRUE(CompareHistories(Summaries({calls, calls, calls}, 4)).ok());
}

TEST(CompareHistoriesTest, NamesTheFirstDifferingCall) {
  std::vector<CollectiveCall> a(kCalls, kCalls + 5), b = a;
  b[3] = CollectiveCall::AllGather(9, DType::kF32);
  const absl::Status s = CompareHistories(Summaries({a, a, b}, 4));
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_EQ(
      s.message(),
      "collective #4 differs: ranks 0-1 Broadcast(f32 x 3, root 5); rank 2 AllGather(f32 x 9)");
}

TEST(CompareHistoriesTest, NamesAnInvalidCall) {
  std::vector<HistorySummary> ranks;
  for (bool valid : {true, false}) {
    CallHistory h(2);
    h.Record(kCalls[0]);
    h.Record(kCalls[2], valid);
    ranks.push_back(Deserialize(Serialize(h, 2)));
  }
  const absl::Status s = CompareHistories(ranks);
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("collective #2 failed on rank 1: invalid arguments to AllReduce(f16 x 7, max)"));
}

TEST(CompareHistoriesTest, ReportsDivergenceOlderThanTheWindow) {
  std::vector<CollectiveCall> a(kCalls, kCalls + 5), b = a;
  b[0] = CollectiveCall::AllGather(1, DType::kF32);
  const absl::Status s = CompareHistories(Summaries({a, b}, 2));
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("differ before the calls kept"));
}

}  // namespace
}  // namespace zero
