// The C functions of libzero_allocator.so, linked in and called directly, as
// PyTorch calls them. The process-wide allocator reads the environment on the
// first call, so the environment is set before main.
#include "memory/interop/zero_allocator.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

constexpr ssize_t kMiB = ssize_t{1} << 20;

const bool kEnvironment = [] {
  setenv("ZERO_DEVICES", "host:2x64MiB", 1);
  setenv("ZERO_ALLOCATOR_CAP", "40MiB", 1);
  unsetenv("ZERO_ALLOCATOR_STATS");
  return true;
}();

std::string StatsJson() {
  char* json = zero_stats_json();
  EXPECT_NE(json, nullptr);
  std::string out = json != nullptr ? json : "";
  std::free(json);
  return out;
}

// One counter from the statistics, e.g. Counter("\"double_free\":").
long Counter(const std::string& key, int nth = 0) {
  const std::string json = StatsJson();
  size_t at = 0;
  for (int i = 0; i <= nth; ++i) {
    at = json.find(key, i == 0 ? 0 : at + 1);
    if (at == std::string::npos) return -1;
  }
  return std::strtol(json.c_str() + at + key.size(), nullptr, 10);
}

TEST(ZeroAllocatorTest, MallocFreeRoundTrip) {
  const long allocs = Counter("\"num_allocs\":", 1);
  auto* ptr = static_cast<unsigned char*>(zero_malloc(5 * kMiB, 1, nullptr));
  ASSERT_NE(ptr, nullptr) << zero_last_error();
  for (ssize_t i = 0; i < 5 * kMiB; i += 4096) ptr[i] = static_cast<unsigned char>(i / 4096);
  for (ssize_t i = 0; i < 5 * kMiB; i += 4096) {
    ASSERT_EQ(ptr[i], static_cast<unsigned char>(i / 4096));
  }
  EXPECT_THAT(StatsJson(), HasSubstr(absl::StrCat("\"requested\":", 5 * kMiB, ",")));
  zero_free(ptr, 5 * kMiB, 1, nullptr);
  EXPECT_EQ(Counter("\"num_allocs\":", 1), allocs + 1) << "device 1 counts it";
  EXPECT_EQ(Counter("\"cap_used\":", 1), 0);
  EXPECT_THAT(StatsJson(), HasSubstr("\"kind\":\"host\""));
}

TEST(ZeroAllocatorTest, BadRequestsReturnNullAndAreCounted) {
  const long sizes = Counter("\"invalid_size\":");
  const long devices = Counter("\"invalid_device\":");
  EXPECT_EQ(zero_malloc(0, 0, nullptr), nullptr);
  EXPECT_EQ(zero_malloc(-1, 0, nullptr), nullptr);
  EXPECT_THAT(zero_last_error(), HasSubstr("-1 bytes"));
  EXPECT_EQ(Counter("\"invalid_size\":"), sizes + 2);
  EXPECT_EQ(zero_malloc(4096, 2, nullptr), nullptr);
  EXPECT_EQ(zero_malloc(4096, -3, nullptr), nullptr);
  EXPECT_THAT(zero_last_error(), HasSubstr("no device -3"));
  EXPECT_EQ(Counter("\"invalid_device\":"), devices + 2);
}

TEST(ZeroAllocatorTest, BadFreesAreCountedAndHarmless) {
  const long foreign = Counter("\"foreign_pointer\":");
  const long doubles = Counter("\"double_free\":");
  int on_stack = 0;
  zero_free(&on_stack, sizeof(on_stack), 0, nullptr);
  EXPECT_EQ(Counter("\"foreign_pointer\":"), foreign + 1);
  void* ptr = zero_malloc(1000, 0, nullptr);
  ASSERT_NE(ptr, nullptr);
  zero_free(ptr, 1000, 0, nullptr);
  zero_free(ptr, 1000, 0, nullptr);
  EXPECT_EQ(Counter("\"double_free\":"), doubles + 1);
  EXPECT_THAT(zero_last_error(), HasSubstr("double free"));
  zero_free(nullptr, 0, 0, nullptr);  // free(NULL): nothing, not even an error
  EXPECT_EQ(Counter("\"double_free\":"), doubles + 1);
}

TEST(ZeroAllocatorTest, RecordStreamIsExportedAndHarmlessOnBadPointers) {
  const long foreign = Counter("\"foreign_pointer\":");
  void* ptr = zero_malloc(1000, 1, nullptr);
  ASSERT_NE(ptr, nullptr);
  zero_record_stream(ptr, nullptr);
  EXPECT_EQ(Counter("\"foreign_pointer\":"), foreign);
  int on_stack = 0;
  zero_record_stream(&on_stack, nullptr);
  EXPECT_EQ(Counter("\"foreign_pointer\":"), foreign + 1);
  EXPECT_THAT(zero_last_error(), HasSubstr("record_stream"));
  zero_free(ptr, 1000, 1, nullptr);
}

TEST(ZeroAllocatorTest, CapFromTheEnvironmentHolds) {
  const long ooms = Counter("\"out_of_memory\":");
  void* a = zero_malloc(30 * kMiB, 0, nullptr);
  ASSERT_NE(a, nullptr) << zero_last_error();
  EXPECT_EQ(zero_malloc(20 * kMiB, 0, nullptr), nullptr) << "40 MiB cap, 64 MiB device";
  EXPECT_THAT(zero_last_error(), HasSubstr("limit of 40.00 MiB"));
  EXPECT_EQ(Counter("\"out_of_memory\":"), ooms + 1);
  void* b = zero_malloc(20 * kMiB, 1, nullptr);  // another device, another cap
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(Counter("\"cap_used\":"), 30 * kMiB);
  zero_free(a, 30 * kMiB, 0, nullptr);
  zero_free(b, 20 * kMiB, 1, nullptr);
}

TEST(ZeroAllocatorTest, FourThreadsAtOnce) {
  const long errors = Counter("\"invalid_size\":");
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&bad, t] {
      std::vector<std::pair<unsigned char*, ssize_t>> live;
      for (int i = 0; i < 300; ++i) {
        const ssize_t size = 256 * (1 + (i * 13 + t) % 97);
        auto* p = static_cast<unsigned char*>(zero_malloc(size, t % 2, nullptr));
        if (p == nullptr) { ++bad[t]; continue; }
        std::memset(p, t + 1, size);
        live.emplace_back(p, size);
        if (live.size() > 8) {  // free out of order, checking nobody overwrote
          auto [q, n] = live.front();
          live.erase(live.begin());
          if (q[0] != t + 1 || q[n - 1] != t + 1) ++bad[t];
          zero_free(q, n, t % 2, nullptr);
        }
      }
      for (auto [q, n] : live) zero_free(q, n, t % 2, nullptr);
      (void)zero_malloc(0, 0, nullptr);
      (void)zero_last_error();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EXPECT_EQ(Counter("\"invalid_size\":"), errors + 4);
  EXPECT_EQ(Counter("\"allocated\":", 0), 0);
  EXPECT_EQ(Counter("\"allocated\":", 1), 0);
}

}  // namespace
