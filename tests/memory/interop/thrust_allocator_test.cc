// Thrust over a host device's pool, compiled by g++ with Thrust's CPP device
// system (BUILD sets THRUST_DEVICE_SYSTEM): containers, and the temporary
// storage of an algorithm through an execution policy.
#include "memory/interop/thrust_allocator.h"

#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/system/cpp/execution_policy.h>

#include <cstdint>
#include <vector>

#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

static_assert(THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CPP, "see BUILD");

namespace zero {
namespace {

class ThrustAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 64 * kMiB});
  }
  DevicePool& pool() { return system_->pool(0); }
  std::unique_ptr<DeviceSystem> system_;
};

// A fixed pseudo-random sequence (no seed from the clock).
std::vector<uint32_t> Shuffled(int n) {
  std::vector<uint32_t> out(n);
  uint32_t x = 12345;
  for (auto& v : out) v = (x = x * 1664525u + 1013904223u) >> 8;
  return out;
}

TEST_F(ThrustAllocatorTest, HostVectorAndSortWithPolicyAllocator) {
  using Vector = thrust::host_vector<uint32_t, ThrustAllocator<uint32_t>>;
  const std::vector<uint32_t> input = Shuffled(100000);
  ThrustAllocator<uint32_t> alloc(&pool(), nullptr, Tag::kActivations);
  {
    Vector values(input.begin(), input.end(), alloc);
    EXPECT_EQ(system_->device_of(thrust::raw_pointer_cast(values.data())), 0);
    const uint64_t before = pool().stats().num_allocs;
    EXPECT_EQ(pool().stats().tag(Tag::kActivations).current, input.size() * sizeof(uint32_t));

    // The sort's scratch memory comes from the pool through the policy.
    ThrustAllocator<char> scratch(&pool(), nullptr, Tag::kOther);
    thrust::sort(thrust::cpp::par(scratch), values.begin(), values.end());
    EXPECT_GT(pool().stats().num_allocs, before);
    EXPECT_GT(pool().stats().tag(Tag::kOther).total, 0u);
    EXPECT_EQ(pool().stats().tag(Tag::kOther).current, 0u) << "scratch returned";

    std::vector<uint32_t> expected = input;
    std::sort(expected.begin(), expected.end());
    ASSERT_EQ(values.size(), expected.size());
    EXPECT_TRUE(std::equal(values.begin(), values.end(), expected.begin()));
  }
  EXPECT_EQ(pool().stats().allocated, 0u);
  EXPECT_EQ(pool().stats().num_errors, 0u) << "every deallocate matched its allocate";
}

TEST_F(ThrustAllocatorTest, DeviceVectorWithDevicePointers) {
  ThrustDeviceAllocator<int64_t> alloc(&system_->pool(1), nullptr, Tag::kParameters);
  {
    thrust::device_vector<int64_t, ThrustDeviceAllocator<int64_t>> values(10000, 0, alloc);
    thrust::sequence(values.begin(), values.end());
    EXPECT_EQ(thrust::reduce(values.begin(), values.end()), int64_t{10000} * 9999 / 2);
    EXPECT_EQ(system_->device_of(thrust::raw_pointer_cast(values.data())), 1);
    EXPECT_EQ(system_->pool(1).stats().tag(Tag::kParameters).current, 10000 * sizeof(int64_t));
    thrust::host_vector<int64_t> back = values;
    EXPECT_EQ(back[9999], 9999);
  }
  EXPECT_EQ(system_->pool(1).stats().allocated, 0u);
  EXPECT_EQ(system_->pool(1).stats().num_errors, 0u);
}

TEST_F(ThrustAllocatorTest, RebindEqualityAndFailure) {
  ThrustAllocator<int> ints(&pool());
  ThrustAllocator<double>::rebind<char>::other chars(ints);
  EXPECT_TRUE(ints == chars);
  EXPECT_FALSE(ints != chars);
  EXPECT_FALSE(ints == ThrustAllocator<int>(&system_->pool(1)));
  EXPECT_THROW((void)ints.allocate(size_t{65} * kMiB / sizeof(int)), std::bad_alloc);
  EXPECT_THROW((void)ints.allocate(~size_t{0}), std::bad_alloc);
  int* empty = ints.allocate(0);
  ASSERT_NE(empty, nullptr);
  ints.deallocate(empty, 0);
  EXPECT_EQ(pool().stats().allocated, 0u);
}

}  // namespace
}  // namespace zero
