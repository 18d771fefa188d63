// One typed suite run over every resource, as RMM tests its resources: the
// device pool, the pinned host pool (the same CachingPool routine over host
// arenas) and each adaptor stacked over the device pool.
#include <chrono>
#include <functional>
#include <utility>
#include <latch>
#include <sstream>
#include <thread>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/limiting_adaptor.h"
#include "memory/logging_adaptor.h"
#include "memory/statistics_adaptor.h"
#include "offload/host_pool.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

struct PoolOnly {
  explicit PoolOnly(DeviceSystem* system) : top(&system->pool(0)) {}
  MemoryResource* top;
};
struct PinnedOnly {
  explicit PinnedOnly(DeviceSystem* system)
      : pool(*PinnedHostPool::Create(system, 64 * kMiB, {.arena_bytes = 8 * kMiB})),
        top(pool.get()) {}
  std::unique_ptr<PinnedHostPool> pool;
  MemoryResource* top;
};
struct WithStatistics {
  explicit WithStatistics(DeviceSystem* system) : stats(&system->pool(0)), top(&stats) {}
  StatisticsAdaptor stats;
  MemoryResource* top;
};
struct WithLimit {
  explicit WithLimit(DeviceSystem* system) : limit(&system->pool(0), 48 * kMiB), top(&limit) {}
  LimitingAdaptor limit;
  MemoryResource* top;
};
struct WithLogging {
  explicit WithLogging(DeviceSystem* system) : log(&system->pool(0), &out), top(&log) {}
  std::ostringstream out;
  LoggingAdaptor log;
  MemoryResource* top;
};

template <typename Stack>
class ResourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    system_ = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    stack_ = std::make_unique<Stack>(system_.get());
  }
  MemoryResource& resource() { return *stack_->top; }
  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<Stack> stack_;
};

using Stacks = ::testing::Types<PoolOnly, PinnedOnly, WithStatistics, WithLimit, WithLogging>;
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

TYPED_TEST(ResourceTest, BadFreesAreErrorsAndKeepTheBlock) {
  MemoryResource& r = this->resource();
  auto p = r.Allocate(5000, Tag::kParameters);
  ASSERT_TRUE(p.ok()) << p.status();
  static_cast<char*>(*p)[0] = 42;
  EXPECT_EQ(r.Deallocate(*p, 4000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Deallocate(static_cast<char*>(*p) + 512, 512).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(static_cast<char*>(*p)[0], 42) << "a rejected free must not release the block";
  ASSERT_TRUE(r.Deallocate(*p, 5000).ok());
  EXPECT_EQ(r.Deallocate(*p, 5000).code(), absl::StatusCode::kFailedPrecondition);
}

TYPED_TEST(ResourceTest, FreedMemoryIsReusedAndFullIsAnError) {
  MemoryResource& r = this->resource();
  std::vector<void*> blocks;
  absl::StatusOr<void*> p;
  while ((p = r.Allocate(4 * kMiB)).ok()) blocks.push_back(*p);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("4.00 MiB"));
  ASSERT_GE(blocks.size(), 8u);
  ASSERT_TRUE(r.Deallocate(blocks.back(), 4 * kMiB).ok());
  auto again = r.Allocate(4 * kMiB);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, blocks.back()) << "the freed block is the best fit";
  blocks.back() = *again;
  for (void* b : blocks) ASSERT_TRUE(r.Deallocate(b, 4 * kMiB).ok());
}

// Through every stack: a block freed on stream `a` while `a` still writes it
// goes to a request on stream `b` only behind that write.
TYPED_TEST(ResourceTest, ReuseOnAnotherStreamWaitsForTheFreeingStream) {
  MemoryResource& r = this->resource();
  Stream* a = *this->system_->CreateStream(0);
  Stream* b = *this->system_->CreateStream(0);
  auto p = r.Allocate(4096, Tag::kActivations, a);
  ASSERT_TRUE(p.ok()) << p.status();
  auto* word = static_cast<volatile int*>(*p);
  *word = 0;
  std::latch release(1);
  ASSERT_TRUE(a->Enqueue([&] { release.wait(); *word = 1; }).ok());
  ASSERT_TRUE(r.Deallocate(*p, 4096, a).ok());
  auto q = r.Allocate(4096, Tag::kActivations, b);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(*q, *p) << "best fit reuses the same block";
  int seen = -1;
  ASSERT_TRUE(b->Enqueue([&] { seen = *word; }).ok());
  // a writes 50 ms from now: b, if not ordered after a, reads long before.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.count_down();
  });
  EXPECT_TRUE(b->Synchronize().ok());
  releaser.join();
  EXPECT_EQ(seen, 1) << "b ran before a finished with the block";
  ASSERT_TRUE(a->Synchronize().ok()) << "the latch must outlive its waiter";
  ASSERT_TRUE(r.Deallocate(*q, 4096, b).ok());
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

// A resource over the pool that runs `after_free` once its upstream free
// returned: the moment another thread may be handed the same block.
class AfterFree : public MemoryResource {
 public:
  explicit AfterFree(MemoryResource* upstream) : upstream_(upstream) {}
  std::function<void()> after_free;

 private:
  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) override {
    return upstream_->Allocate(bytes, tag, stream, alignment);
  }
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) override {
    absl::Status status = upstream_->Deallocate(ptr, bytes, stream);
    if (after_free) std::exchange(after_free, nullptr)();
    return status;
  }
  MemoryResource* upstream_;
};

// The block freed comes back at once to "another thread" with another tag:
// each free must take away its own tag's bytes (the adaptor looked the tag
// up after the upstream free, and took the newcomer's).
TEST(StatisticsAdaptorTest, ABlockReusedDuringItsFreeKeepsEachTagsBytes) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
  AfterFree hooked(&system->pool(0));
  StatisticsAdaptor stats(&hooked);
  void* p = *stats.Allocate(4096, Tag::kParameters);
  void* q = nullptr;
  hooked.after_free = [&] { q = *stats.Allocate(4096, Tag::kGradients); };
  ASSERT_TRUE(stats.Deallocate(p, 4096).ok());
  ASSERT_EQ(q, p) << "the pool did not reuse the block: the test shows nothing";
  auto tag_bytes = [&](Tag tag) { return stats.statistics().tag_bytes[static_cast<int>(tag)]; };
  EXPECT_EQ(tag_bytes(Tag::kGradients).current, 4096);
  EXPECT_EQ(tag_bytes(Tag::kParameters).current, 0);
  ASSERT_TRUE(stats.Deallocate(q, 4096).ok());
  EXPECT_EQ(tag_bytes(Tag::kGradients).current, 0);
  EXPECT_EQ(tag_bytes(Tag::kParameters).current, 0);
  EXPECT_EQ(stats.statistics().bytes.current, 0);
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
