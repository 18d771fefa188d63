// std::pmr over a host device's pool: containers grow through the pool, the
// pool's statistics see every byte, failures throw as std::pmr requires.
#include "memory/interop/pmr_resource.h"

#include <memory_resource>
#include <numeric>
#include <string>
#include <vector>

#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/interop/bad_alloc.h"

namespace zero {
namespace {

class PmrResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 64 * kMiB});
  }
  DevicePool& pool() { return system_->pool(1); }
  std::unique_ptr<DeviceSystem> system_;
};

TEST_F(PmrResourceTest, VectorGrowsThroughThePool) {
  PmrResource resource(&pool(), nullptr, Tag::kActivations);
  constexpr int kCount = 200000;
  {
    std::pmr::vector<int> values(&resource);
    for (int i = 0; i < kCount; ++i) values.push_back(i);
    EXPECT_EQ(std::accumulate(values.begin(), values.end(), int64_t{0}),
              int64_t{kCount} * (kCount - 1) / 2);
    EXPECT_EQ(system_->device_of(values.data()), 1);
    const PoolStats stats = pool().stats();
    EXPECT_EQ(stats.tag(Tag::kActivations).current, values.capacity() * sizeof(int));
    EXPECT_EQ(stats.tag(Tag::kActivations).live, 1u);
    EXPECT_GT(stats.num_allocs, 10u) << "each growth is one pool allocation";
    EXPECT_GE(stats.tag(Tag::kActivations).peak, kCount * sizeof(int));
  }
  const PoolStats stats = pool().stats();
  EXPECT_EQ(stats.requested, 0u);
  EXPECT_EQ(stats.num_frees, stats.num_allocs);
  EXPECT_EQ(stats.num_errors, 0u);
  EXPECT_EQ(system_->pool(0).stats().num_allocs, 0u);
}

TEST_F(PmrResourceTest, NestedContainersShareTheResource) {
  PmrResource resource(&pool(), nullptr, Tag::kOther);
  {
    std::pmr::vector<std::pmr::string> names(&resource);
    for (int i = 0; i < 100; ++i) names.emplace_back(std::string(100, 'a' + i % 26));
    EXPECT_EQ(std::string(names[27]), std::string(100, 'b'));
    EXPECT_EQ(names[27].get_allocator().resource(), &resource) << "uses-allocator construction";
    EXPECT_GT(pool().stats().tag(Tag::kOther).live, 100u);
  }
  EXPECT_EQ(pool().stats().allocated, 0u);
}

TEST_F(PmrResourceTest, FailureThrowsBadAllocWithThePoolsReason) {
  PmrResource resource(&pool());
  try {
    (void)resource.allocate(65 * kMiB);
    FAIL() << "a request larger than the device must throw";
  } catch (const BadAlloc& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("device 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)resource.allocate(65 * kMiB), std::bad_alloc);
  EXPECT_EQ(pool().stats().num_ooms, 2u);
}

TEST_F(PmrResourceTest, ZeroBytesAndAlignment) {
  PmrResource resource(&pool());
  void* empty = resource.allocate(0);
  ASSERT_NE(empty, nullptr);
  void* aligned = resource.allocate(100, 4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(aligned) % 4096, 0u);
  resource.deallocate(aligned, 100, 4096);
  resource.deallocate(empty, 0);
  EXPECT_EQ(pool().stats().allocated, 0u);
  EXPECT_EQ(pool().stats().num_errors, 0u);
}

TEST_F(PmrResourceTest, EqualWhenPoolAndStreamMatch) {
  Stream* other_stream = *system_->CreateStream(1);
  PmrResource a(&pool(), nullptr, Tag::kParameters);
  PmrResource same(&pool(), nullptr, Tag::kGradients);  // the tag does not matter
  PmrResource other_stream_resource(&pool(), other_stream);
  PmrResource other_pool(&system_->pool(0));
  EXPECT_TRUE(a.is_equal(same));
  EXPECT_TRUE(a == same);
  EXPECT_FALSE(a.is_equal(other_stream_resource));
  EXPECT_FALSE(a.is_equal(other_pool));
  EXPECT_FALSE(a.is_equal(*std::pmr::new_delete_resource()));
}

TEST_F(PmrResourceTest, UpstreamOfAStandardPoolResource) {
  PmrResource resource(&pool(), nullptr, Tag::kActivations);
  {
    std::pmr::unsynchronized_pool_resource cache(&resource);
    std::pmr::vector<double> values(&cache);
    values.assign(1000, 1.5);
    EXPECT_EQ(std::accumulate(values.begin(), values.end(), 0.0), 1500.0);
    EXPECT_GT(pool().stats().tag(Tag::kActivations).current, 0u);
  }
  EXPECT_EQ(pool().stats().tag(Tag::kActivations).current, 0u);
}

}  // namespace
}  // namespace zero
