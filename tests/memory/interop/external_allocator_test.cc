// ExternalAllocator, the logic behind libzero_allocator.so, over host devices
// it does not own: routing, error counting, the cap, statistics.
#include "memory/interop/external_allocator.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "base/units.h"
#include "memory/simulated_backend.h"
#include "tests/memory/failing_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

class ExternalAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 64 * kMiB});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = *std::move(system);
  }
  ExternalAllocator Make(size_t cap = 0) {
    return ExternalAllocator(system_.get(), {.cap = cap, .stats_path = "", .tag = Tag::kOther});
  }
  std::unique_ptr<DeviceSystem> system_;
};

TEST_F(ExternalAllocatorTest, RoundTripOnTheRequestedDevice) {
  ExternalAllocator allocator = Make();
  auto ptr = allocator.Allocate(3 * kMiB, 1, nullptr);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  EXPECT_EQ(system_->device_of(*ptr), 1);
  std::memset(*ptr, 0x5a, 3 * kMiB);
  EXPECT_EQ(static_cast<unsigned char*>(*ptr)[3 * kMiB - 1], 0x5a);
  EXPECT_EQ(system_->pool(1).stats().requested, 3 * kMiB);
  EXPECT_EQ(system_->pool(0).stats().num_allocs, 0u);
  ASSERT_TRUE(allocator.Deallocate(*ptr, 3 * kMiB, 1, nullptr).ok());
  const PoolStats stats = system_->pool(1).stats();
  EXPECT_EQ(stats.num_allocs, 1u);
  EXPECT_EQ(stats.num_frees, 1u);
  EXPECT_EQ(stats.requested, 0u);
  EXPECT_EQ(allocator.total_errors(), 0u);
  EXPECT_EQ(allocator.last_error(), "");
}

TEST_F(ExternalAllocatorTest, CountsEveryKindOfFailure) {
  ExternalAllocator allocator = Make();
  EXPECT_FALSE(allocator.Allocate(0, 0, nullptr).ok());
  EXPECT_FALSE(allocator.Allocate(-8, 0, nullptr).ok());
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidSize), 2u);
  EXPECT_FALSE(allocator.Allocate(64, 2, nullptr).ok());
  EXPECT_FALSE(allocator.Allocate(64, -1, nullptr).ok());
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidDevice), 2u);
  EXPECT_THAT(allocator.last_error(), HasSubstr("no device -1"));
  int fake_stream = 0;
  EXPECT_FALSE(allocator.Allocate(64, 0, &fake_stream).ok()) << "host devices have no native streams";
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidStream), 1u);
  EXPECT_EQ(allocator.Allocate(65 * kMiB, 0, nullptr).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(allocator.errors(ExternalError::kOutOfMemory), 1u);

  int on_stack = 0;
  EXPECT_EQ(allocator.Deallocate(&on_stack, 4, 0, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(allocator.errors(ExternalError::kForeignPointer), 1u);
  void* ptr = *allocator.Allocate(4096, 0, nullptr);
  EXPECT_FALSE(allocator.Deallocate(ptr, 4096, 1, nullptr).ok()) << "freed on the wrong device";
  EXPECT_EQ(allocator.errors(ExternalError::kForeignPointer), 2u);
  EXPECT_FALSE(allocator.Deallocate(ptr, 4095, 0, nullptr).ok());
  EXPECT_EQ(allocator.errors(ExternalError::kSizeMismatch), 1u);
  ASSERT_TRUE(allocator.Deallocate(ptr, 4096, 0, nullptr).ok());
  EXPECT_FALSE(allocator.Deallocate(ptr, 4096, 0, nullptr).ok());
  EXPECT_EQ(allocator.errors(ExternalError::kDoubleFree), 1u);
  EXPECT_THAT(allocator.last_error(), HasSubstr("double free"));
  EXPECT_TRUE(allocator.Deallocate(nullptr, 0, 0, nullptr).ok()) << "free(NULL) is a no-op";
  EXPECT_EQ(allocator.total_errors(), 10u);
}

// PyTorch passes card numbers: with "cuda:2,0" card 2 is device 0. A
// backend renumbered that way over host devices routes by the same rule the
// card's does (Backend::native_id), so a card the system does not use is an
// error, never another card's memory.
TEST(ExternalAllocatorNativeIdTest, TheCallersDeviceNumberIsTheNativeId) {
  auto backend = std::make_unique<testing::FailingBackend>(
      std::make_unique<HostBackend>(2, 64 * kMiB));
  backend->Renumber({2, 0});
  auto system = DeviceSystem::CreateOver(std::move(backend));
  ASSERT_TRUE(system.ok()) << system.status();
  ExternalAllocator allocator(system->get(), {});
  for (const auto& [card, index] : {std::pair{2, 0}, std::pair{0, 1}}) {
    auto ptr = allocator.Allocate(4096, card, nullptr);
    ASSERT_TRUE(ptr.ok()) << ptr.status();
    EXPECT_EQ((*system)->device_of(*ptr), index) << "card " << card;
    EXPECT_TRUE(allocator.Deallocate(*ptr, 4096, card, nullptr).ok());
  }
  EXPECT_EQ(allocator.Allocate(4096, 1, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(allocator.last_error(), HasSubstr("no device 1 (this process uses host devices 2, 0)"));
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidDevice), 1u);
  EXPECT_THAT(allocator.StatsJson(), HasSubstr("\"native_id\":2,"));
}

// The pool's RecordStream semantics are tested with the pools
// (tests/memory/host_pool_test, caching_pool tests); here, that the call
// finds the pointer's device by itself and counts what it refuses.
TEST_F(ExternalAllocatorTest, RecordStreamFindsTheDeviceAndCountsRefusals) {
  ExternalAllocator allocator = Make();
  void* ptr = *allocator.Allocate(4096, 1, nullptr);
  EXPECT_TRUE(allocator.RecordStream(ptr, nullptr).ok());
  EXPECT_TRUE(allocator.RecordStream(nullptr, nullptr).ok()) << "null: nothing";
  int fake_stream = 0;
  EXPECT_EQ(allocator.RecordStream(ptr, &fake_stream).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidStream), 1u);
  int on_stack = 0;
  EXPECT_EQ(allocator.RecordStream(&on_stack, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(allocator.last_error(), HasSubstr("not memory of any device"));
  EXPECT_EQ(allocator.errors(ExternalError::kForeignPointer), 1u);
  ASSERT_TRUE(allocator.Deallocate(ptr, 4096, 1, nullptr).ok());
  EXPECT_EQ(allocator.RecordStream(ptr, nullptr).code(), absl::StatusCode::kNotFound)
      << "after its free the block is not allocated";
  EXPECT_THAT(allocator.last_error(), HasSubstr("not allocated"));
  EXPECT_EQ(allocator.errors(ExternalError::kForeignPointer), 2u);
  EXPECT_EQ(allocator.total_errors(), 3u);
}

TEST_F(ExternalAllocatorTest, CapLimitsLiveBytesPerDevice) {
  ExternalAllocator allocator = Make(8 * kMiB);
  void* a = *allocator.Allocate(6 * kMiB, 0, nullptr);
  EXPECT_EQ(allocator.cap_used(0), 6 * kMiB);
  EXPECT_EQ(allocator.Allocate(3 * kMiB, 0, nullptr).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(allocator.errors(ExternalError::kOutOfMemory), 1u);
  EXPECT_THAT(allocator.last_error(), HasSubstr("limit"));
  void* b = *allocator.Allocate(3 * kMiB, 1, nullptr);  // the cap is per device
  ASSERT_TRUE(allocator.Deallocate(a, 6 * kMiB, 0, nullptr).ok());
  void* c = *allocator.Allocate(8 * kMiB, 0, nullptr);
  EXPECT_EQ(allocator.cap_used(0), 8 * kMiB);
  ASSERT_TRUE(allocator.Deallocate(b, 3 * kMiB, 1, nullptr).ok());
  ASSERT_TRUE(allocator.Deallocate(c, 8 * kMiB, 0, nullptr).ok());
  EXPECT_EQ(allocator.cap_used(0), 0u);
}

TEST_F(ExternalAllocatorTest, StatsJsonHoldsDevicesAndErrors) {
  ExternalAllocator allocator = Make(16 * kMiB);
  void* ptr = *allocator.Allocate(1000, 1, nullptr);
  (void)allocator.Allocate(0, 0, nullptr);
  const std::string json = allocator.StatsJson();
  EXPECT_THAT(json, HasSubstr("\"kind\":\"host\""));
  EXPECT_THAT(json, HasSubstr("\"cap\":16777216"));
  EXPECT_THAT(json, HasSubstr("\"invalid_size\":1"));
  EXPECT_THAT(json, HasSubstr("\"device\":1,"));
  EXPECT_THAT(json, HasSubstr("\"requested\":1000,"));
  EXPECT_THAT(json, HasSubstr("\"cap_used\":1000}"));
  EXPECT_THAT(json, HasSubstr("\"last_error\":\"INVALID_ARGUMENT: device 0: cannot allocate 0"));
  ASSERT_TRUE(allocator.Deallocate(ptr, 1000, 1, nullptr).ok());

  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/stats.json";
  ASSERT_TRUE(allocator.WriteStats(path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"num_frees\":1,"));
}

TEST(ExternalAllocatorOptionsTest, ReadsTheEnvironment) {
  setenv("ZERO_ALLOCATOR_CAP", "8GiB", 1);
  setenv("ZERO_ALLOCATOR_STATS", "/tmp/x.json", 1);
  auto options = ExternalAllocatorOptionsFromEnvironment();
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->cap, 8 * kGiB);
  EXPECT_EQ(options->stats_path, "/tmp/x.json");
  EXPECT_FALSE(options->throw_on_oom);
  setenv("ZERO_ALLOCATOR_OOM", "throw", 1);
  EXPECT_TRUE(ExternalAllocatorOptionsFromEnvironment()->throw_on_oom);
  setenv("ZERO_ALLOCATOR_OOM", "raise", 1);
  EXPECT_THAT(ExternalAllocatorOptionsFromEnvironment().status().message(),
              HasSubstr("ZERO_ALLOCATOR_OOM: 'raise' is neither"));
  unsetenv("ZERO_ALLOCATOR_OOM");
  setenv("ZERO_ALLOCATOR_CAP", "lots", 1);
  EXPECT_THAT(ExternalAllocatorOptionsFromEnvironment().status().message(),
              HasSubstr("ZERO_ALLOCATOR_CAP"));
  unsetenv("ZERO_ALLOCATOR_CAP");
  unsetenv("ZERO_ALLOCATOR_STATS");
  options = ExternalAllocatorOptionsFromEnvironment();
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->cap, 0u);
  EXPECT_EQ(options->stats_path, "");
}

// Four threads at once, as PyTorch's autograd and data threads would call.
TEST_F(ExternalAllocatorTest, FourThreadsShareTheDevices) {
  ExternalAllocator allocator = Make(32 * kMiB);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int64_t size = 512 * (1 + (i * 7 + t) % 64);
        const int device = (i + t) % 2;
        auto ptr = allocator.Allocate(size, device, nullptr);
        if (!ptr.ok()) { ++bad[t]; continue; }
        std::memset(*ptr, t, size);
        if (static_cast<unsigned char*>(*ptr)[size - 1] != t) ++bad[t];
        if (!allocator.Deallocate(*ptr, size, device, nullptr).ok()) ++bad[t];
      }
      (void)allocator.Allocate(0, 0, nullptr);  // one counted failure each
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EXPECT_EQ(allocator.errors(ExternalError::kInvalidSize), 4u);
  EXPECT_EQ(system_->pool(0).stats().num_allocs + system_->pool(1).stats().num_allocs, 800u);
  EXPECT_EQ(system_->pool(0).stats().allocated + system_->pool(1).stats().allocated, 0u);
  EXPECT_EQ(allocator.cap_used(0) + allocator.cap_used(1), 0u);
}

}  // namespace
}  // namespace zero
