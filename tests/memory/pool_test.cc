// The caching pool on host and meta devices: the same code runs on both.
#include "memory/pool.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <latch>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "memory/testing/stream_faults.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

constexpr size_t kCapacity = 64 * kMiB;

class PoolTest : public ::testing::TestWithParam<DeviceSpec::Kind> {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({GetParam(), 2, kCapacity});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
  }
  DevicePool& pool(int d = 0) { return system_->pool(d); }
  void* Alloc(size_t bytes, Tag tag = Tag::kOther, int d = 0) {
    auto p = pool(d).Allocate(bytes, tag);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }
  std::unique_ptr<DeviceSystem> system_;
};

TEST_P(PoolTest, AllocatesInsideTheDevicesSliceAndCountsIt) {
  void* p = Alloc(1000, Tag::kParameters, 1);
  EXPECT_EQ(system_->device_of(p), 1);
  PoolStats s = pool(1).stats();
  EXPECT_EQ(s.allocated, 1024u);
  EXPECT_EQ(s.requested, 1000u);
  EXPECT_EQ(s.reserved, 2 * kMiB);
  EXPECT_EQ(s.tag(Tag::kParameters).current, 1000u);
  EXPECT_EQ(s.tag(Tag::kParameters).live, 1u);
  ASSERT_TRUE(pool(1).Deallocate(p, 1000).ok());
  s = pool(1).stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.reserved, 2 * kMiB) << "freed memory stays cached";
  EXPECT_EQ(s.cached_free, 2 * kMiB);
  EXPECT_EQ(*pool(1).Trim(), 2 * kMiB);
  EXPECT_EQ(pool(1).stats().reserved, 0u);
  EXPECT_EQ(system_->space().mapped_bytes(1), 0u);
}

TEST_P(PoolTest, ReusesCachedBlocksWithoutMapping) {
  void* p = Alloc(100 * kKiB);
  ASSERT_TRUE(pool().Deallocate(p, 100 * kKiB).ok());
  void* q = Alloc(100 * kKiB);
  EXPECT_EQ(p, q);
  EXPECT_EQ(pool().stats().num_maps, 1u);
}

TEST_P(PoolTest, SplitsAndCoalescesByAddress) {
  void* a = Alloc(kMiB);
  void* b = Alloc(kMiB);
  void* c = Alloc(kMiB);
  ASSERT_TRUE(pool().Deallocate(b, kMiB).ok());
  ASSERT_TRUE(pool().Deallocate(a, kMiB).ok());
  // Freed on the stream that used them, they wait in the front cache for a
  // request of their size; a 2 MiB one flushes them and finds them merged.
  EXPECT_EQ(pool().stats().largest_free_block, kMiB) << "cached: free, not merged yet";
  void* ab = Alloc(2 * kMiB);
  EXPECT_EQ(ab, a) << "a and b merged into one block";
  ASSERT_TRUE(pool().Deallocate(ab, 2 * kMiB).ok());
  ASSERT_TRUE(pool().Deallocate(c, kMiB).ok());
  pool().FlushCache();
  EXPECT_EQ(pool().Segments().size(), 1u);
  EXPECT_EQ(pool().Segments()[0].blocks.size(), 1u);
}

// The front cache (memory/internal/front_cache.h): a block freed on the
// stream that used it comes back to that stream's next request of its size
// without touching the free blocks; to callers it is free at once, and a
// second free or a RecordStream of it is refused as for any free block.
TEST_P(PoolTest, FrontCacheGivesAFreedBlockBackToItsStream) {
  void* a = Alloc(300 * kKiB, Tag::kActivations);
  void* guard = Alloc(kKiB);
  const size_t free_before = pool().stats().largest_free_block;
  ASSERT_TRUE(pool().Deallocate(a, 300 * kKiB).ok());
  PoolStats s = pool().stats();
  EXPECT_EQ(s.allocated, AlignUp(kKiB, 512)) << "the cached block counts as free";
  EXPECT_EQ(s.tag(Tag::kActivations).live, 0u);
  EXPECT_EQ(s.largest_free_block, std::max(free_before, 300 * kKiB));
  bool listed_free = false;
  for (const SegmentInfo& seg : pool().Segments()) {
    for (const BlockInfo& b : seg.blocks) listed_free |= b.address == uintptr_t(a) && !b.allocated;
  }
  EXPECT_TRUE(listed_free) << "the snapshot shows it free";
  EXPECT_EQ(pool().Deallocate(a, 300 * kKiB).code(), absl::StatusCode::kFailedPrecondition)
      << "double free of a cached block";
  EXPECT_EQ(pool().RecordStream(a, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Alloc(300 * kKiB), a) << "taken back by the same size on the same stream";
  EXPECT_EQ(pool().stats().tag(Tag::kOther).live, 2u);
  ASSERT_TRUE(pool().Deallocate(a, 300 * kKiB).ok());
  ASSERT_TRUE(pool().Deallocate(guard, kKiB).ok());
}

// Bounded: past kSlots cached blocks the oldest is booked free; and any
// other request flushes the cache first, so nothing it holds makes the pool
// grow.
TEST_P(PoolTest, FrontCacheIsBoundedAndNeverMakesThePoolGrow) {
  constexpr int kBlocks = FrontCache::kSlots + 4;
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(Alloc(kMiB));
  const size_t reserved = pool().stats().reserved;
  for (void* p : blocks) ASSERT_TRUE(pool().Deallocate(p, kMiB).ok());
  // The 4 oldest left the cache and merged; the rest wait for a 1 MiB request.
  EXPECT_GE(pool().stats().largest_free_block, 4 * kMiB);
  void* big = Alloc(kBlocks * kMiB);  // only fits once everything merged
  EXPECT_EQ(pool().stats().reserved, reserved) << "served from the flushed cache";
  EXPECT_EQ(big, blocks[0]);
  ASSERT_TRUE(pool().Deallocate(big, kBlocks * kMiB).ok());
}

TEST_P(PoolTest, GrowsAFreeBlockByMappingOnlyWhatIsMissing) {
  void* a = Alloc(kMiB);
  ASSERT_TRUE(pool().Deallocate(a, kMiB).ok());
  // 2 MiB are cached; 3 MiB needs one more granule next to them, not 4 MiB.
  void* b = Alloc(3 * kMiB);
  EXPECT_EQ(a, b);
  EXPECT_EQ(pool().stats().reserved, 4 * kMiB);
}

TEST_P(PoolTest, HonoursAlignment) {
  Alloc(512);
  auto p = pool().Allocate(1000, Tag::kOther, nullptr, 64 * kKiB);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % (64 * kKiB), 0u);
  EXPECT_TRUE(pool().Deallocate(*p, 1000).ok());
}

TEST_P(PoolTest, RejectsBadRequests) {
  EXPECT_EQ(pool().Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool().Allocate(100, Tag::kOther, nullptr, 48).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool().Allocate(100, Tag::kOther, nullptr, 4 * kMiB).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool().Allocate(100, Tag::kOther, system_->default_stream(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool().stats().num_errors, 4u);
  EXPECT_EQ(pool().stats().reserved, 0u);
}

TEST_P(PoolTest, OutOfMemoryNamesTheDeviceAndItsState) {
  void* hold = Alloc(10 * kMiB, Tag::kGradients);
  auto p = pool().Allocate(kCapacity + 1, Tag::kActivations);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string message(p.status().message());
  EXPECT_THAT(message, HasSubstr("device 0"));
  EXPECT_THAT(message, HasSubstr("activations"));
  EXPECT_THAT(message, HasSubstr("10.00 MiB allocated"));
  EXPECT_THAT(message, HasSubstr("reserved"));
  EXPECT_THAT(message, HasSubstr("free of 64.00 MiB capacity"));
  EXPECT_THAT(message, HasSubstr("largest free block"));
  EXPECT_EQ(pool().stats().num_ooms, 1u);
  // Nothing already stored is lost.
  EXPECT_TRUE(pool().Deallocate(hold, 10 * kMiB).ok());
}

TEST_P(PoolTest, TrimsCachedMemoryBeforeGivingUp) {
  void* a = Alloc(30 * kMiB);
  void* b = Alloc(30 * kMiB);
  ASSERT_TRUE(pool().Deallocate(a, 30 * kMiB).ok());
  // 60 MiB mapped, 30 cached: 34 MiB fits only once the cache is unmapped.
  void* c = Alloc(34 * kMiB);
  ASSERT_NE(c, nullptr);
  EXPECT_GE(pool().stats().num_unmaps, 1u);
  EXPECT_LE(pool().stats().reserved, kCapacity);
  auto d = pool().Allocate(kMiB);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted) << "device is full";
  EXPECT_TRUE(pool().Deallocate(b, 30 * kMiB).ok());
  EXPECT_TRUE(pool().Deallocate(c, 34 * kMiB).ok());
}

TEST_P(PoolTest, BadFreesAreErrorsAndLeaveStateIntact) {
  void* p = Alloc(4096, Tag::kParameters);
  void* other = Alloc(4096, Tag::kParameters, 1);
  const PoolStats before = pool().stats();
  int on_stack = 0;
  auto code = [&](void* ptr, size_t bytes) { return pool().Deallocate(ptr, bytes).code(); };
  EXPECT_EQ(code(&on_stack, 4), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(static_cast<char*>(p) + 512, 4096), absl::StatusCode::kNotFound);
  EXPECT_EQ(code(p, 4095), absl::StatusCode::kInvalidArgument);
  absl::Status wrong_device = pool().Deallocate(other, 4096);
  EXPECT_EQ(wrong_device.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(wrong_device.message()), HasSubstr("belongs to device 1"));
  const PoolStats after = pool().stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.num_errors, before.num_errors + 4);
  ASSERT_TRUE(pool().Deallocate(p, 4096).ok());
  absl::Status twice = pool().Deallocate(p, 4096);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("double free"));
  EXPECT_TRUE(system_->Deallocate(other, 4096).ok()) << "routed to device 1";
}

// b is freed after a, so it merges into a's free block and its own start is
// gone: its second free must still read as a double free (the drop-in
// allocator counts frees by this code), not as a foreign pointer.
TEST_P(PoolTest, ADoubleFreeAfterMergingDownIsStillADoubleFree) {
  void* a = Alloc(4096);
  void* b = Alloc(4096);
  ASSERT_TRUE(pool().Deallocate(a, 4096).ok());
  ASSERT_TRUE(pool().Deallocate(b, 4096).ok());
  absl::Status twice = pool().Deallocate(b, 4096);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition) << twice;
  EXPECT_THAT(std::string(twice.message()), HasSubstr("double free"));
  EXPECT_EQ(pool().stats().allocated, 0u);
}

TEST_P(PoolTest, TracksPeaksPerTag) {
  void* a = Alloc(1000, Tag::kParameters);
  void* b = Alloc(3000, Tag::kGradients);
  ASSERT_TRUE(pool().Deallocate(b, 3000).ok());
  void* c = Alloc(500, Tag::kGradients);
  PoolStats s = pool().stats();
  EXPECT_EQ(s.tag(Tag::kGradients).current, 500u);
  EXPECT_EQ(s.tag(Tag::kGradients).peak, 3000u);
  EXPECT_EQ(s.tag(Tag::kGradients).total, 2u);
  EXPECT_EQ(s.peak_requested, 4000u);
  pool().ResetPeaks();
  EXPECT_EQ(pool().stats().tag(Tag::kGradients).peak, 500u);
  ASSERT_TRUE(pool().Deallocate(a, 1000).ok());
  ASSERT_TRUE(pool().Deallocate(c, 500).ok());
}

TEST_P(PoolTest, SnapshotAndTimelineDescribeWhatHappened) {
  void* p = Alloc(5000, Tag::kOptimizerState);
  const std::string json = pool().SnapshotJson();
  EXPECT_THAT(json, HasSubstr("\"segments\":[{"));
  EXPECT_THAT(json, HasSubstr("\"state\":\"active_allocated\",\"tag\":\"optimizer_state\""));
  EXPECT_THAT(json, HasSubstr("\"requested_size\":5000"));
  ASSERT_TRUE(pool().Deallocate(p, 5000).ok());
  ASSERT_TRUE(pool().Trim().ok());
  std::vector<TraceAction> actions;
  for (const TraceEvent& e : pool().timeline().events()) actions.push_back(e.action);
  EXPECT_EQ(actions, (std::vector<TraceAction>{TraceAction::kSegmentMap, TraceAction::kAlloc,
                                               TraceAction::kFreeCompleted,
                                               TraceAction::kSegmentUnmap}));
  EXPECT_THAT(pool().timeline().ToCsv(), HasSubstr(",alloc,0,"));
  EXPECT_THAT(PoolStatsJson(pool().stats()), HasSubstr("\"optimizer_state\":{\"current\":0,\"peak\":5000"));
}

// Recorded streams (another device's too, and null for the default stream)
// get their event at free; reuse stays best fit on any stream.
TEST_P(PoolTest, RecordedStreamsDoNotChangeWhichBlockIsReused) {
  Stream* a = *system_->CreateStream(0);
  Stream* peer = *system_->CreateStream(1);
  auto p = pool().Allocate(8192, Tag::kCommunication, a);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(pool().RecordStream(*p, peer).ok());
  ASSERT_TRUE(pool().RecordStream(*p, nullptr).ok());
  ASSERT_TRUE(pool().Deallocate(*p, 8192, a).ok());
  auto q = pool().Allocate(8192, Tag::kCommunication, *system_->CreateStream(0));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q, *p);
  ASSERT_TRUE(pool().Deallocate(*q, 8192).ok());
  ASSERT_TRUE(pool().Trim().ok()) << "trim waits for the recorded events";
  EXPECT_EQ(pool().stats().reserved, 0u);
}

INSTANTIATE_TEST_SUITE_P(Kinds, PoolTest,
                         ::testing::Values(DeviceSpec::Kind::kHost, DeviceSpec::Kind::kMeta),
                         [](const auto& info) {
                           return info.param == DeviceSpec::Kind::kHost ? "host" : "meta";
                         });

// Two free blocks of one size: `other` freed on a held stream (its use is
// not done), `own` freed on the allocating stream. The allocation takes
// `own` with no Stream::Wait (best fit alone would take `other`, the lower
// address, and wait); the next one can only get `other` and must wait: its
// work reads what the held stream wrote before the free.
TEST(PoolStreamTest, SameStreamReuseNeedsNoWaitCrossStreamStillWaits) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, kCapacity});
  ASSERT_TRUE(system.ok()) << system.status();
  DevicePool& pool = (*system)->pool(0);
  Stream* mine = *(*system)->CreateStream(0);
  Stream* held = *(*system)->CreateStream(0);
  constexpr size_t kBytes = 8192;
  std::vector<void*> blocks;  // other, guard, own, guard: no coalescing
  for (Stream* s : {held, mine, mine, mine}) {
    auto p = pool.Allocate(kBytes, Tag::kOther, s);
    ASSERT_TRUE(p.ok()) << p.status();
    blocks.push_back(*p);
  }
  void* const other = blocks[0];
  void* const own = blocks[2];
  std::latch release(1);
  ASSERT_TRUE(held->Enqueue([&] { release.wait(); }).ok());
  ASSERT_TRUE(held->Fill(other, 7, kBytes).ok());
  ASSERT_TRUE(pool.Deallocate(other, kBytes, held).ok());
  ASSERT_TRUE(pool.Deallocate(own, kBytes, mine).ok());
  // Out of the front cache (where `mine` would take `own` back anyway, and
  // `other` would wait for `held` alone): the best-fit path's preference.
  pool.FlushCache();

  std::optional<DroppedStreamWait> counter(std::in_place, 1 << 30, mine);  // counts, drops none
  auto same = pool.Allocate(kBytes, Tag::kOther, mine);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, own) << "the block freed on this stream is preferred";
  EXPECT_EQ(counter->waits_seen(), 0) << "a same-stream reuse waits for nothing";

  auto cross = pool.Allocate(kBytes, Tag::kOther, mine);
  ASSERT_TRUE(cross.ok()) << cross.status();
  EXPECT_EQ(*cross, other);
  EXPECT_EQ(counter->waits_seen(), 1) << "a cross-stream reuse waits for the freeing stream";
  counter.reset();
  std::atomic<int> seen{-1};
  ASSERT_TRUE(mine->Enqueue([&] { seen = static_cast<unsigned char*>(*cross)[kBytes - 1]; }).ok());
  release.count_down();
  ASSERT_TRUE(mine->Synchronize().ok());
  EXPECT_EQ(seen.load(), 7) << "the new owner ran before the old owner's write";
  for (void* p : {*same, *cross, blocks[1], blocks[3]}) {
    ASSERT_TRUE(pool.Deallocate(p, kBytes, mine).ok());
  }
}

// A stream whose events cannot be made (a card's stream of another card, a
// broken context): the free waits for the stream instead, and the block is
// free; before, it stayed allocated with that user and every free failed.
class NoEventStream : public Stream {
 public:
  explicit NoEventStream(Stream* inner) : inner_(inner) {}
  int device() const override { return inner_->device(); }
  absl::Status DoEnqueue(absl::AnyInvocable<void() &&> fn) override {
    return inner_->Enqueue(std::move(fn));
  }
  absl::Status DoCopy(void* dst, const void* src, size_t bytes) override {
    return inner_->Copy(dst, src, bytes);
  }
  absl::Status DoFill(void* dst, unsigned char value, size_t bytes) override {
    return inner_->Fill(dst, value, bytes);
  }
  absl::StatusOr<std::shared_ptr<Event>> DoRecord() override {
    return absl::InternalError("no event on this stream");
  }
  absl::Status DoWait(const std::shared_ptr<Event>& event) override { return inner_->Wait(event); }
  absl::Status DoSynchronize() override {
    ++synchronized;
    return inner_->Synchronize();
  }
  int synchronized = 0;

 private:
  Stream* inner_;
};

TEST(PoolStreamTest, AUserStreamWithoutEventsIsWaitedForAtTheFree) {
  auto system = *DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, kCapacity});
  DevicePool& pool = system->pool(0);
  NoEventStream reader(*system->CreateStream(0));
  void* p = *pool.Allocate(8192, Tag::kOther);
  std::atomic<bool> read{false};
  ASSERT_TRUE(reader.Enqueue([&] {
    absl::SleepFor(absl::Milliseconds(20));
    read = true;
  }).ok());
  ASSERT_TRUE(pool.RecordStream(p, &reader).ok());
  absl::Status freed = pool.Deallocate(p, 8192);
  ASSERT_TRUE(freed.ok()) << freed;
  EXPECT_TRUE(read.load()) << "the free returned before the reader's work ran";
  EXPECT_EQ(reader.synchronized, 1);
  EXPECT_EQ(pool.stats().allocated, 0u);
}

TEST(MetaPoolTest, HoldsModelsFarLargerThanThisMachine) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1024, 80'000'000'000});
  ASSERT_TRUE(system.ok()) << system.status();
  auto p = (*system)->pool(1023).Allocate(70'000'000'000, Tag::kParameters);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*system)->device_of(*p), 1023);
  EXPECT_EQ((*system)->pool(1023).stats().tag(Tag::kParameters).current, 70'000'000'000u);
}

}  // namespace
}  // namespace zero
