// One typed suite run over every resource, as RMM tests its resources: the
// pool itself and each adaptor stacked over it.
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/limiting_adaptor.h"
#include "memory/logging_adaptor.h"
#include "memory/statistics_adaptor.h"
#include "memory/units.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

struct PoolOnly {
  explicit PoolOnly(DevicePool* pool) : top(pool) {}
  MemoryResource* top;
};
struct WithStatistics {
  explicit WithStatistics(DevicePool* pool) : stats(pool), top(&stats) {}
  StatisticsAdaptor stats;
  MemoryResource* top;
};
struct WithLimit {
  explicit WithLimit(DevicePool* pool) : limit(pool, 48 * kMiB), top(&limit) {}
  LimitingAdaptor limit;
  MemoryResource* top;
};
struct WithLogging {
  explicit WithLogging(DevicePool* pool) : log(pool, &out), top(&log) {}
  std::ostringstream out;
  LoggingAdaptor log;
  MemoryResource* top;
};

template <typename Stack>
class ResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    stack_ = std::make_unique<Stack>(&system_->pool(0));
  }
  MemoryResource& resource() { return *stack_->top; }
  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<Stack> stack_;
};

using Stacks = ::testing::Types<PoolOnly, WithStatistics, WithLimit, WithLogging>;
TYPED_TEST_SUITE(ResourceTest, Stacks);

TYPED_TEST(ResourceTest, AllocatesWritableAlignedMemory) {
  for (size_t bytes : {size_t{1}, size_t{255}, size_t{4096}, 3 * kMiB}) {
    auto p = this->resource().Allocate(bytes, Tag::kOther, nullptr, 256);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
    static_cast<char*>(*p)[bytes - 1] = 1;
    EXPECT_TRUE(this->resource().Deallocate(*p, bytes).ok());
  }
}

TYPED_TEST(ResourceTest, PassesErrorsThrough) {
  EXPECT_EQ(this->resource().Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(this->resource().Allocate(100 * kMiB).status().code(),
            absl::StatusCode::kResourceExhausted);
  int on_stack = 0;
  EXPECT_EQ(this->resource().Deallocate(&on_stack, 4).code(), absl::StatusCode::kNotFound);
}

TEST(StatisticsAdaptorTest, CountsBytesAndTags) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 64 * kMiB});
  StatisticsAdaptor stats(&system->pool(0));
  void* a = *stats.Allocate(1000, Tag::kParameters);
  void* b = *stats.Allocate(3000, Tag::kGradients);
  ASSERT_TRUE(stats.Deallocate(b, 3000).ok());
  EXPECT_FALSE(stats.Deallocate(b, 3000).ok()) << "a failed free does not count";
  ResourceStatistics s = stats.statistics();
  EXPECT_EQ(s.bytes.current, 1000);
  EXPECT_EQ(s.bytes.peak, 4000);
  EXPECT_EQ(s.bytes.total, 4000);
  EXPECT_EQ(s.allocations.current, 1);
  EXPECT_EQ(s.tag_bytes[static_cast<int>(Tag::kGradients)].peak, 3000);
  EXPECT_EQ(s.tag_bytes[static_cast<int>(Tag::kGradients)].current, 0);
  ASSERT_TRUE(stats.Deallocate(a, 1000).ok());
}

TEST(LimitingAdaptorTest, RefusesPastTheCapAndRecovers) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 64 * kMiB});
  LimitingAdaptor limit(&system->pool(0), 10 * kMiB);
  void* a = *limit.Allocate(8 * kMiB);
  auto b = limit.Allocate(4 * kMiB, Tag::kActivations);
  ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("limit of 10.00 MiB"));
  EXPECT_EQ(limit.used(), 8 * kMiB);
  ASSERT_TRUE(limit.Deallocate(a, 8 * kMiB).ok());
  EXPECT_TRUE(limit.Allocate(10 * kMiB).ok());
}

TEST(LoggingAdaptorTest, WritesOneCsvLinePerCall) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 64 * kMiB});
  std::ostringstream out;
  LoggingAdaptor log(&system->pool(0), &out);
  void* a = *log.Allocate(1000, Tag::kParameters);
  ASSERT_TRUE(log.Deallocate(a, 1000).ok());
  ASSERT_FALSE(log.Deallocate(a, 1000).ok());
  std::istringstream lines(out.str());
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], "thread,time_ns,action,pointer,size,tag,stream,status");
  EXPECT_THAT(all[1], HasSubstr(",allocate,"));
  EXPECT_THAT(all[1], HasSubstr(",1000,parameters,"));
  EXPECT_THAT(all[2], HasSubstr(",free,"));
  EXPECT_THAT(all[3], HasSubstr("double free"));
}

}  // namespace
}  // namespace zero
