// zero_malloc with ZERO_ALLOCATOR_OOM=throw: out-of-memory is a
// std::bad_alloc carrying the pool's message (what PyTorch's pluggable
// allocator turns into a Python error at the allocating call); every other
// failure still returns null.
#include <cstdlib>
#include <new>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/interop/zero_allocator.h"

namespace {

using ::testing::HasSubstr;

const bool kEnvironment = [] {
  setenv("ZERO_DEVICES", "host:1x16MiB", 1);
  setenv("ZERO_ALLOCATOR_OOM", "throw", 1);
  unsetenv("ZERO_ALLOCATOR_CAP");
  unsetenv("ZERO_ALLOCATOR_STATS");
  return true;
}();

TEST(ZeroAllocatorThrowTest, OutOfMemoryThrowsWithThePoolsMessage) {
  void* kept = zero_malloc(12 << 20, 0, nullptr);
  ASSERT_NE(kept, nullptr) << zero_last_error();
  std::string what;
  try {
    (void)zero_malloc(8 << 20, 0, nullptr);
  } catch (const std::bad_alloc& e) {
    what = e.what();
  }
  EXPECT_THAT(what, HasSubstr("out of memory allocating 8.00 MiB"));
  EXPECT_THAT(zero_last_error(), HasSubstr("out of memory")) << "counted as before";
  zero_free(kept, 12 << 20, 0, nullptr);
  void* again = zero_malloc(8 << 20, 0, nullptr);
  EXPECT_NE(again, nullptr) << "nothing was lost: " << zero_last_error();
  zero_free(again, 8 << 20, 0, nullptr);
}

TEST(ZeroAllocatorThrowTest, OtherFailuresStillReturnNull) {
  EXPECT_EQ(zero_malloc(0, 0, nullptr), nullptr);
  EXPECT_EQ(zero_malloc(64, 3, nullptr), nullptr);
  EXPECT_THAT(zero_last_error(), HasSubstr("no device 3"));
}

}  // namespace
