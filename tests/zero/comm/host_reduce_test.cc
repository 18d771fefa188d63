// The local backend's reduction arithmetic: fp32 accumulation in source
// order, one rounding, in-place safety.
#include "zero/comm/internal/host_reduce.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace zero {
namespace {

TEST(HostReduceTest, Bf16AccumulatesInFp32AndRoundsOnce) {
  // bf16 steps by 2 at 256: adding 1 three times in bf16 would stay at 256;
  // in fp32 the sum is 259, which rounds (ties to even) to 260.
  std::vector<bf16> a = {FloatToBF16(256)}, one = {FloatToBF16(1)};
  std::vector<bf16> out(1);
  HostReduce(DType::kBF16, ReduceOp::kSum, {a.data(), one.data(), one.data(), one.data()},
             out.data(), 1);
  EXPECT_EQ(BF16ToFloat(out[0]), 260.0f);
}

TEST(HostReduceTest, F16AverageDividesTheFp32Sum) {
  std::vector<f16> x = {FloatToF16(65504)}, y = {FloatToF16(65504)};  // sum overflows f16
  std::vector<f16> out(1);
  HostReduce(DType::kF16, ReduceOp::kAvg, {x.data(), y.data()}, out.data(), 1);
  EXPECT_EQ(F16ToFloat(out[0]), 65504.0f);
}

TEST(HostReduceTest, F32SumIsTheSequentialSum) {
  std::vector<float> a = {1e8f}, b = {1.0f}, c = {-1e8f};
  std::vector<float> out(1);
  HostReduce(DType::kF32, ReduceOp::kSum, {a.data(), b.data(), c.data()}, out.data(), 1);
  EXPECT_EQ(out[0], (1e8f + 1.0f) + -1e8f);  // 0: order matters, and is rank order
}

TEST(HostReduceTest, MaxPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, 1, 3}, b = {2, nan, 4};
  std::vector<float> out(3);
  HostReduce(DType::kF32, ReduceOp::kMax, {a.data(), b.data()}, out.data(), 3);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 4);
}

TEST(HostReduceTest, DestinationMayBeASource) {
  constexpr size_t kCount = 5000;  // several blocks
  std::vector<float> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 2.0f * i;
  }
  HostReduce(DType::kF32, ReduceOp::kSum, {a.data(), b.data()}, b.data(), kCount);
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(b[i], 3.0f * i) << i;
}

}  // namespace
}  // namespace zero
