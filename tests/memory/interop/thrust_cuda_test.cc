// Thrust on a card over the pool (see thrust_cuda.h). Skips without a card;
// the card check runs it.
#include "tests/memory/interop/thrust_cuda.h"

#include <numeric>

#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero::testing {
namespace {

TEST(ThrustCudaTest, ReducesOnTheCardWithPoolMemory) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kCuda});
  if (!system.ok()) GTEST_SKIP() << "no card: " << system.status();
  DevicePool& pool = (*system)->pool(0);
  Stream* stream = *(*system)->CreateStream(0);
  std::vector<uint64_t> values(1 << 22);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i * 3;

  absl::StatusOr<uint64_t> sum = SumOnCard(&pool, stream, values);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, std::accumulate(values.begin(), values.end(), uint64_t{0}));
  const PoolStats stats = pool.stats();
  EXPECT_EQ(stats.tag(Tag::kActivations).total, 1u) << "the values";
  EXPECT_GT(stats.tag(Tag::kOther).total, 0u) << "the reduction's scratch";
  EXPECT_EQ(stats.allocated, 0u);
  EXPECT_EQ(stats.num_errors, 0u);
}

}  // namespace
}  // namespace zero::testing
