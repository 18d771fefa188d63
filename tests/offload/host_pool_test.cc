// PinnedHostPool on host devices (mmap arenas) and meta devices (addresses
// only): arenas, split and coalesce, tagged stats, errors, and reuse across
// streams ordered by events.
#include "offload/host_pool.h"

#include <chrono>
#include <cstring>
#include <latch>
#include <random>
#include <thread>
#include <vector>

#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

class PinnedHostPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    pool_ = MakePool(8 * kMiB, 2 * kMiB);
  }
  std::unique_ptr<PinnedHostPool> MakePool(size_t capacity, size_t arena_bytes) {
    auto pool = PinnedHostPool::Create(system_.get(), capacity, {.arena_bytes = arena_bytes});
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? std::move(*pool) : nullptr;
  }
  void* Alloc(size_t bytes, Tag tag = Tag::kOther, Stream* stream = nullptr) {
    auto p = pool_->Allocate(bytes, tag, stream);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }
  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<PinnedHostPool> pool_;
};

TEST_F(PinnedHostPoolTest, ServesFromAnArenaAndCountsByTag) {
  EXPECT_EQ(pool_->source_name(), "mmap");
  EXPECT_TRUE(pool_->has_bytes());
  void* p = Alloc(1000, Tag::kOptimizerState);
  std::memset(p, 0x7F, 1000);  // real, writable host memory
  PoolStats s = pool_->stats();
  EXPECT_EQ(s.device, -1);
  EXPECT_EQ(s.capacity, 8 * kMiB);
  EXPECT_EQ(s.allocated, 1024u) << "rounded to 512 B";
  EXPECT_EQ(s.requested, 1000u);
  EXPECT_EQ(s.reserved, 2 * kMiB) << "one arena of arena_bytes";
  EXPECT_EQ(s.num_maps, 1u);
  EXPECT_EQ(s.tag(Tag::kOptimizerState).current, 1000u);
  EXPECT_EQ(s.tag(Tag::kOptimizerState).live, 1u);
  EXPECT_EQ(s.largest_free_block, 2 * kMiB - 1024);
  ASSERT_TRUE(pool_->Deallocate(p, 1000).ok());
  s = pool_->stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.tag(Tag::kOptimizerState).current, 0u);
  EXPECT_EQ(s.tag(Tag::kOptimizerState).peak, 1000u);
  EXPECT_EQ(s.cached_free, 2 * kMiB) << "freed memory stays cached";
  EXPECT_EQ(*pool_->Trim(), 2 * kMiB);
  EXPECT_EQ(pool_->stats().reserved, 0u);
  EXPECT_EQ(pool_->stats().num_unmaps, 1u);
}

// The same timeline and snapshot as the device pool: one CachingPool routine.
TEST_F(PinnedHostPoolTest, KeepsATimelineAndASnapshotWithAnArenaPerSegment) {
  void* a = Alloc(3 * kMiB / 2, Tag::kParameters);  // fills most of arena 0
  void* b = Alloc(kMiB, Tag::kGradients);           // arena 1
  const std::vector<SegmentInfo> segments = pool_->Segments();
  ASSERT_EQ(segments.size(), 2u) << "arenas are separate segments";
  EXPECT_EQ(segments[0].size, 2 * kMiB);
  EXPECT_EQ(segments[1].size, 2 * kMiB);
  EXPECT_THAT(pool_->SnapshotJson(), HasSubstr("\"device\":-1"));
  EXPECT_THAT(pool_->SnapshotJson(), HasSubstr("\"state\":\"active_allocated\",\"tag\":\"gradients\""));
  ASSERT_TRUE(pool_->Deallocate(a, 3 * kMiB / 2).ok());
  ASSERT_TRUE(pool_->Deallocate(b, kMiB).ok());
  ASSERT_TRUE(pool_->Trim().ok());
  const std::string csv = pool_->timeline().ToCsv();
  for (const char* action : {",segment_map,-1,", ",alloc,-1,", ",free_completed,-1,",
                             ",segment_unmap,-1,"}) {
    EXPECT_THAT(csv, HasSubstr(action));
  }
}

TEST_F(PinnedHostPoolTest, SplitsBestFitAndCoalescesNeighbours) {
  char* a = static_cast<char*>(Alloc(64 * kKiB));
  char* b = static_cast<char*>(Alloc(64 * kKiB));
  char* c = static_cast<char*>(Alloc(64 * kKiB));
  EXPECT_EQ(b, a + 64 * kKiB);
  EXPECT_EQ(c, b + 64 * kKiB);
  ASSERT_TRUE(pool_->Deallocate(a, 64 * kKiB).ok());
  ASSERT_TRUE(pool_->Deallocate(b, 64 * kKiB).ok());
  // a and b merged into one 128 KiB hole: best fit takes it, not the tail.
  EXPECT_EQ(Alloc(128 * kKiB), a);
  ASSERT_TRUE(pool_->Deallocate(a, 128 * kKiB).ok());
  ASSERT_TRUE(pool_->Deallocate(c, 64 * kKiB).ok());
  pool_->FlushCache();  // the front cache's blocks merge when flushed
  EXPECT_EQ(pool_->stats().largest_free_block, 2 * kMiB) << "the whole arena again";
  EXPECT_EQ(pool_->stats().num_maps, 1u);
}

TEST_F(PinnedHostPoolTest, ArenasNeverMergeAndEmptyOnesMakeRoomForALargerOne) {
  pool_ = MakePool(2 * kMiB, kMiB);
  void* a = Alloc(kMiB);
  void* b = Alloc(kMiB);
  EXPECT_EQ(pool_->stats().num_maps, 2u);
  ASSERT_TRUE(pool_->Deallocate(a, kMiB).ok());
  ASSERT_TRUE(pool_->Deallocate(b, kMiB).ok());
  EXPECT_EQ(pool_->stats().largest_free_block, kMiB) << "blocks of two arenas merged";
  // Neither arena holds 1.5 MiB and the capacity is spent: both go back and
  // one arena of the request's size replaces them.
  void* big = Alloc(kMiB + kMiB / 2);
  ASSERT_NE(big, nullptr);
  const PoolStats s = pool_->stats();
  EXPECT_EQ(s.num_unmaps, 2u);
  EXPECT_EQ(s.reserved, kMiB + kMiB / 2);
  ASSERT_TRUE(pool_->Deallocate(big, kMiB + kMiB / 2).ok());
}

TEST_F(PinnedHostPoolTest, AnArenaGrowsToALargeRequest) {
  void* p = Alloc(3 * kMiB);
  EXPECT_EQ(pool_->stats().reserved, 3 * kMiB);
  ASSERT_TRUE(pool_->Deallocate(p, 3 * kMiB).ok());
}

TEST_F(PinnedHostPoolTest, BadRequestsAreClearErrorsAndChangeNothing) {
  void* p = Alloc(4096, Tag::kParameters);
  const PoolStats before = pool_->stats();

  auto zero = pool_->Allocate(0);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("zero bytes"));
  EXPECT_EQ(pool_->Allocate(64, Tag::kOther, nullptr, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->Allocate(64, Tag::kOther, nullptr, 2 * kMiB).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto huge = pool_->Allocate(9 * kMiB);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("larger than the whole pool"));
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("largest free block"));

  int on_stack = 0;
  EXPECT_EQ(pool_->Deallocate(&on_stack, 4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool_->Deallocate(static_cast<char*>(p) + 8, 4088).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(pool_->Deallocate(p, 4000).code(), absl::StatusCode::kInvalidArgument);

  const PoolStats after = pool_->stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.reserved, before.reserved);
  EXPECT_EQ(after.tag(Tag::kParameters).current, 4096u);
  EXPECT_EQ(after.num_errors, before.num_errors + 6);
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);

  ASSERT_TRUE(pool_->Deallocate(p, 4096).ok()) << "the block survived the bad calls";
  absl::Status twice = pool_->Deallocate(p, 4096);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("double free"));
  EXPECT_THAT(std::string(twice.message()), HasSubstr("pinned host pool"));
}

TEST_F(PinnedHostPoolTest, FullCapacityIsResourceExhaustedWithState) {
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) held.push_back(Alloc(2 * kMiB));
  auto more = pool_->Allocate(512);
  ASSERT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(more.status().message()), HasSubstr("8.00 MiB allocated"));
  for (void* p : held) ASSERT_TRUE(pool_->Deallocate(p, 2 * kMiB).ok());
  EXPECT_TRUE(pool_->Allocate(512).ok()) << "usable again once freed";
}

TEST_F(PinnedHostPoolTest, CreateRejectsBadArguments) {
  EXPECT_EQ(PinnedHostPool::Create(nullptr, kMiB).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinnedHostPool::Create(system_.get(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinnedHostPool::Create(system_.get(), kMiB, {.round_to = 1000}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A block freed on stream A goes to a request on stream B only behind A's
// work on it.
TEST_F(PinnedHostPoolTest, ReuseOnAnotherStreamWaitsForTheFreeingStream) {
  Stream* a = *system_->CreateStream(0);
  Stream* b = *system_->CreateStream(0);
  auto* word = static_cast<volatile int*>(Alloc(4096, Tag::kOther, a));
  *word = 0;
  std::latch release(1);
  ASSERT_TRUE(a->Enqueue([&] { release.wait(); *word = 1; }).ok());
  ASSERT_TRUE(pool_->Deallocate(const_cast<int*>(word), 4096, a).ok());
  void* again = Alloc(4096, Tag::kOther, b);
  ASSERT_EQ(again, const_cast<int*>(word)) << "best fit reuses the same block";
  int seen = -1;
  ASSERT_TRUE(b->Enqueue([&] { seen = *word; }).ok());
  release.count_down();
  ASSERT_TRUE(b->Synchronize().ok());
  EXPECT_EQ(seen, 1) << "B ran before A finished with the block";
}

// The same stream needs no event: its own order protects the block.
TEST_F(PinnedHostPoolTest, ReuseOnTheSameStreamIsImmediate) {
  Stream* a = *system_->CreateStream(0);
  std::latch release(1);
  ASSERT_TRUE(a->Enqueue([&] { release.wait(); }).ok());
  void* p = Alloc(4096, Tag::kOther, a);
  ASSERT_TRUE(pool_->Deallocate(p, 4096, a).ok());
  EXPECT_EQ(Alloc(4096, Tag::kOther, a), p) << "returned while A is still blocked";
  release.count_down();
  ASSERT_TRUE(a->Synchronize().ok());
}

// A null stream is the host: the allocation returns only once the stream
// that freed the block is done with it.
TEST_F(PinnedHostPoolTest, HostReuseBlocksUntilTheStreamIsDone) {
  Stream* a = *system_->CreateStream(0);
  auto* word = static_cast<volatile int*>(Alloc(4096, Tag::kOther, a));
  *word = 0;
  std::latch release(1);
  ASSERT_TRUE(a->Enqueue([&] { release.wait(); *word = 1; }).ok());
  ASSERT_TRUE(pool_->Deallocate(const_cast<int*>(word), 4096, a).ok());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.count_down();
  });
  void* again = Alloc(4096);
  releaser.join();
  ASSERT_EQ(again, const_cast<int*>(word));
  EXPECT_EQ(*word, 1) << "the host got the block while A still wrote to it";
}

TEST_F(PinnedHostPoolTest, ThreadsAllocateAndFreeConcurrently) {
  pool_ = MakePool(64 * kMiB, 8 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 500; ++i) {
        if (live.size() < 8 && rng() % 2 == 0) {
          const size_t bytes = 1 + rng() % (256 * kKiB);
          auto p = pool_->Allocate(bytes, static_cast<Tag>(t));
          ASSERT_TRUE(p.ok()) << p.status();
          std::memset(*p, t, bytes);
          live.emplace_back(static_cast<unsigned char*>(*p), bytes);
        } else if (!live.empty()) {
          auto [p, bytes] = live.back();
          live.pop_back();
          ASSERT_EQ(p[bytes - 1], t) << "another thread wrote into this block";
          ASSERT_TRUE(pool_->Deallocate(p, bytes).ok());
        }
      }
      for (auto [p, bytes] : live) ASSERT_TRUE(pool_->Deallocate(p, bytes).ok());
    });
  }
  for (auto& th : threads) th.join();
  const PoolStats s = pool_->stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.num_allocs, s.num_frees);
  EXPECT_LE(s.peak_reserved, 64 * kMiB);
}

TEST(PinnedHostPoolMetaTest, MetaDevicesGetAddressesWithoutBytes) {
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 80 * kGiB});
  ASSERT_TRUE(system.ok());
  auto pool = PinnedHostPool::Create(system->get(), 4 * size_t{1} << 40);  // 4 TiB
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_FALSE((*pool)->has_bytes());
  auto p = (*pool)->Allocate(size_t{1} << 40, Tag::kOptimizerState);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*pool)->stats().tag(Tag::kOptimizerState).current, size_t{1} << 40);
  EXPECT_TRUE((*pool)->Deallocate(*p, size_t{1} << 40).ok());
}

}  // namespace
}  // namespace zero
