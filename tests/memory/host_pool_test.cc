// What only host devices can show: real bytes and really ordered streams.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <latch>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/units.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/testing/stream_faults.h"

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

// The pool records its events when a block is freed: work enqueued on the
// freeing stream afterwards does not hold up the block's next owner.
TEST_F(HostPoolTest, ReuseWaitsOnlyForWorkBeforeTheFree) {
  DevicePool& pool = system_->pool(0);
  Stream* a = *system_->CreateStream(0);
  auto p = pool.Allocate(4096, Tag::kActivations, a);
  ASSERT_TRUE(p.ok() && pool.Deallocate(*p, 4096, a).ok());
  std::latch later_work(1);
  std::promise<void> checked;
  std::atomic<bool> released{false};
  ASSERT_TRUE(a->Enqueue([&] { later_work.wait(); }).ok());
  // Releases `a` after the check, or after a second: a wrong pool makes the
  // test fail, not hang.
  std::thread releaser([&, done = checked.get_future()] {
    if (done.wait_for(std::chrono::seconds(1)) != std::future_status::ready) released = true;
    later_work.count_down();
  });
  // EXPECT, not ASSERT, until the releaser is joined.
  Stream* b = *system_->CreateStream(0);
  auto q = pool.Allocate(4096, Tag::kActivations, b);
  EXPECT_TRUE(q.ok() && *q == *p);
  EXPECT_TRUE(q.ok() && b->Fill(*q, 1, 4096).ok());
  EXPECT_TRUE(b->Synchronize().ok());
  EXPECT_FALSE(released) << "b waited for work enqueued on a after the free";
  checked.set_value();
  releaser.join();
  ASSERT_TRUE(a->Synchronize().ok()) << "the latch must outlive its waiter";
}

// A consumer stream still reads a buffer that its producer has freed; the
// pool hands the buffer to a third stream, which overwrites it at once. The
// delay mode makes the read slow (16 slices, each 5 to 10 ms late), so only
// the event the free recorded on the consumer (RecordStream) protects it.
std::vector<unsigned char> ReadWhileReused(bool drop_the_pools_wait) {
  constexpr size_t kBytes = 64 * kKiB, kSlices = 16, kSlice = kBytes / kSlices;
  auto system = *DeviceSystem::CreateWithHostStreams(
      {DeviceSpec::Kind::kHost, 1, 64 * kMiB},
      {.delay_seed = 11, .min_delay = absl::Milliseconds(5), .max_delay = absl::Milliseconds(10)});
  DevicePool& pool = system->pool(0);
  Stream* producer = system->default_stream(0);
  Stream* consumer = *system->CreateStream(0);
  Stream* reuser = *system->CreateStream(0);
  std::vector<unsigned char> read(kBytes, 0);
  auto buffer = pool.Allocate(kBytes, Tag::kActivations, producer);
  EXPECT_TRUE(buffer.ok());
  auto* bytes = static_cast<unsigned char*>(*buffer);
  EXPECT_TRUE(producer->Fill(bytes, 0x11, kBytes).ok());
  EXPECT_TRUE(consumer->Wait(*producer->Record()).ok());
  for (size_t k = 0; k < kSlices; ++k) {
    EXPECT_TRUE(consumer->Copy(read.data() + k * kSlice, bytes + k * kSlice, kSlice).ok());
  }
  EXPECT_TRUE(pool.RecordStream(bytes, consumer).ok());
  // The producer's own work is done, so the only wait left is the consumer's.
  EXPECT_TRUE(producer->Synchronize().ok());
  EXPECT_TRUE(pool.Deallocate(bytes, kBytes, producer).ok());
  {
    std::optional<DroppedStreamWait> drop;
    if (drop_the_pools_wait) drop.emplace(1, reuser);
    auto reused = pool.Allocate(kBytes, Tag::kActivations, reuser);
    EXPECT_TRUE(reused.ok());
    EXPECT_EQ(*reused, bytes) << "best fit hands out the freed buffer";
    EXPECT_EQ(drop_the_pools_wait, drop && drop->dropped());
    EXPECT_TRUE(reuser->Fill(*reused, 0x22, kBytes).ok());
    EXPECT_TRUE(pool.Deallocate(*reused, kBytes, reuser).ok());
  }
  EXPECT_TRUE(consumer->Synchronize().ok());
  EXPECT_TRUE(reuser->Synchronize().ok());
  return read;
}

TEST(HostPoolReuseTest, AFreedBufferIsNotOverwrittenWhileAConsumerReadsIt) {
  const std::vector<unsigned char> read = ReadWhileReused(false);
  EXPECT_EQ(std::count(read.begin(), read.end(), 0x11), 64 * kKiB) << "overwritten while read";
}

TEST(HostPoolReuseTest, WithoutThePoolsWaitTheReadSeesTheOverwrite) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the race is made on purpose, and ThreadSanitizer rightly reports it";
#endif
  const std::vector<unsigned char> read = ReadWhileReused(true);
  EXPECT_NE(std::count(read.begin(), read.end(), 0x22), 0) << "the check could not fail";
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
