// The rank-order reduction the process-group callbacks use
// (zero/comm/ordered_reduce.h): the same bits as the local backend's
// sequential loop for any number of CPU threads, in place included.
#include "zero/comm/ordered_reduce.h"

#include <cstring>
#include <random>
#include <vector>

#include "compute/parallel.h"
#include "gtest/gtest.h"
#include "zero/comm/internal/host_reduce.h"

namespace zero {
namespace {

// Values of mixed magnitudes, so the order of the additions shows in the bits.
std::vector<float> Chunks(int world, size_t count) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(world * count);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

std::vector<float> Sequential(const std::vector<float>& chunks, int world, size_t count) {
  std::vector<const void*> sources;
  for (int r = 0; r < world; ++r) sources.push_back(chunks.data() + r * count);
  std::vector<float> out(count);
  HostReduce(DType::kF32, ReduceOp::kSum, sources, out.data(), count);
  return out;
}

TEST(OrderedReduceTest, EqualsTheSequentialLoopForAnyThreadCount) {
  constexpr int kWorld = 5;
  constexpr size_t kCount = 300'001;  // many chunks of the pool, and a ragged end
  const std::vector<float> chunks = Chunks(kWorld, kCount);
  const std::vector<float> expected = Sequential(chunks, kWorld, kCount);
  for (int threads : {1, 2, 3, 8}) {
    SetNumThreads(threads);
    std::vector<float> out(kCount);
    ASSERT_TRUE(
        ReduceInRankOrder(DType::kF32, ReduceOp::kSum, chunks.data(), kWorld, kCount, out.data())
            .ok());
    ASSERT_EQ(std::memcmp(out.data(), expected.data(), kCount * 4), 0) << threads << " threads";
  }
  SetNumThreads(0);
}

TEST(OrderedReduceTest, InPlaceIntoOneOfTheChunks) {
  constexpr int kWorld = 3;
  constexpr size_t kCount = 100'000;
  std::vector<float> chunks = Chunks(kWorld, kCount);
  const std::vector<float> expected = Sequential(chunks, kWorld, kCount);
  float* into = chunks.data() + 2 * kCount;  // the last rank's chunk
  ASSERT_TRUE(ReduceInRankOrder(DType::kF32, ReduceOp::kSum, chunks.data(), kWorld, kCount, into)
                  .ok());
  EXPECT_EQ(std::memcmp(into, expected.data(), kCount * 4), 0);
}

TEST(OrderedReduceTest, Bf16RoundsOnceAndBadArgumentsAreRefused) {
  std::vector<bf16> chunks = {FloatToBF16(256), FloatToBF16(1), FloatToBF16(1), FloatToBF16(1)};
  bf16 out{};
  ASSERT_TRUE(ReduceInRankOrder(DType::kBF16, ReduceOp::kSum, chunks.data(), 4, 1, &out).ok());
  EXPECT_EQ(BF16ToFloat(out), 260.0f) << "259 in fp32, rounded once";
  EXPECT_EQ(ReduceInRankOrder(DType::kF32, ReduceOp::kSum, chunks.data(), 0, 1, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReduceInRankOrder(DType::kF32, ReduceOp::kSum, nullptr, 2, 1, &out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ReduceInRankOrder(DType::kF32, ReduceOp::kSum, nullptr, 2, 0, nullptr).ok());
}

}  // namespace
}  // namespace zero
