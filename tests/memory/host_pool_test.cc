// What only host devices can show: real bytes and really ordered streams.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <latch>
#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

class HostPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 2, 256 * kMiB});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
  }
  std::unique_ptr<DeviceSystem> system_;
};

// A block freed on stream A is reused on stream B only after A's work on it.
TEST_F(HostPoolTest, CrossStreamReuseWaitsForTheFreeingStream) {
  DevicePool& pool = system_->pool(0);
  Stream* a = *system_->CreateStream(0);
  Stream* b = *system_->CreateStream(0);
  auto p = pool.Allocate(4096, Tag::kActivations, a);
  ASSERT_TRUE(p.ok());
  auto* word = static_cast<volatile int*>(*p);
  *word = 0;
  std::latch release(1);
  ASSERT_TRUE(a->Enqueue([&] { release.wait(); *word = 1; }).ok());
  ASSERT_TRUE(pool.Deallocate(*p, 4096, a).ok());
  auto q = pool.Allocate(4096, Tag::kActivations, b);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(*q, *p) << "best fit reuses the same block";
  int seen = -1;
  ASSERT_TRUE(b->Enqueue([&] { seen = *word; }).ok());
  release.count_down();
  ASSERT_TRUE(b->Synchronize().ok());
  EXPECT_EQ(seen, 1) << "B ran before A finished with the block";
}

TEST_F(HostPoolTest, RecordStreamProtectsABlockUsedOnAnotherStream) {
  DevicePool& pool = system_->pool(0);
  Stream* a = *system_->CreateStream(0);
  Stream* side = *system_->CreateStream(0);
  auto p = pool.Allocate(4096, Tag::kCommunication, a);
  ASSERT_TRUE(p.ok());
  auto* word = static_cast<volatile int*>(*p);
  *word = 0;
  std::latch release(1);
  ASSERT_TRUE(side->Enqueue([&] { release.wait(); *word = 7; }).ok());
  ASSERT_TRUE(pool.RecordStream(*p, side).ok());
  ASSERT_TRUE(pool.Deallocate(*p, 4096, a).ok());
  auto q = pool.Allocate(4096, Tag::kCommunication, a);
  ASSERT_EQ(*q, *p);
  int seen = -1;
  ASSERT_TRUE(a->Enqueue([&] { seen = *word; }).ok());
  release.count_down();
  ASSERT_TRUE(a->Synchronize().ok());
  EXPECT_EQ(seen, 7);
  int on_stack = 0;
  EXPECT_EQ(pool.RecordStream(&on_stack, side).code(), absl::StatusCode::kNotFound);
}

TEST_F(HostPoolTest, BytesStayPutThroughChurnAndTrimsElsewhere) {
  std::mt19937_64 rng(7);
  struct Kept { uint64_t* data; size_t words; uint64_t seed; };
  std::vector<Kept> kept;
  for (int i = 0; i < 16; ++i) {
    const size_t words = 1 + rng() % (256 * 1024);
    auto p = system_->pool(0).Allocate(words * 8, Tag::kParameters);
    ASSERT_TRUE(p.ok()) << p.status();
    kept.push_back({static_cast<uint64_t*>(*p), words, rng()});
    for (size_t w = 0; w < words; ++w) kept.back().data[w] = kept.back().seed * (w + 1);
  }
  for (int round = 0; round < 200; ++round) {
    for (int d = 0; d < 2; ++d) {
      const size_t bytes = 512 + rng() % (4 * kMiB);
      auto p = system_->pool(d).Allocate(bytes, Tag::kActivations);
      ASSERT_TRUE(p.ok()) << p.status();
      std::memset(*p, 0xAB, bytes);
      ASSERT_TRUE(system_->pool(d).Deallocate(*p, bytes).ok());
    }
    ASSERT_TRUE(system_->pool(1).Trim().ok());
  }
  for (const Kept& k : kept) {
    for (size_t w = 0; w < k.words; ++w) ASSERT_EQ(k.data[w], k.seed * (w + 1));
  }
}

TEST_F(HostPoolTest, StreamCopiesMoveBytesBetweenDevices) {
  auto src = system_->pool(0).Allocate(kMiB);
  auto dst = system_->pool(1).Allocate(kMiB);
  ASSERT_TRUE(src.ok() && dst.ok());
  std::memset(*src, 0x5A, kMiB);
  Stream* s = system_->default_stream(1);
  ASSERT_TRUE(s->Copy(*dst, *src, kMiB).ok());
  ASSERT_TRUE(s->Synchronize().ok());
  EXPECT_EQ(std::memcmp(*src, *dst, kMiB), 0);
}

}  // namespace
}  // namespace zero
