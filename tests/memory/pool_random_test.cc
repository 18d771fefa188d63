// 100,000 random allocations and frees of 256 B to 256 MiB over 8 host
// devices from 4 threads, checking the pool's invariants after every step;
// and a soak (ZERO_SOAK_SECONDS, default 2; bench/soak.sh runs minutes) of
// the same on small devices with streams in the delay mode, stream-ordered
// frees, trims at random and allocations that fail for capacity.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include <mutex>
#include "base/units.h"
#include "gtest/gtest.h"
#include "absl/time/clock.h"
#include "memory/device_system.h"
#include "memory/stream_delay.h"

namespace zero {
namespace {

constexpr int kDevices = 8;
constexpr int kThreads = 4;
constexpr int kOpsPerThread = 25'000;
constexpr size_t kCapacity = 4 * kGiB;
// The pool's rounding, set here so the test knows it without asking the pool.
constexpr size_t kRoundTo = 512;

struct Live {
  size_t bytes;
  Tag tag;
  Stream* stream = nullptr;  // the soak: where it was allocated and is used
  unsigned char pattern = 0;  // the soak: what its work wrote
};

// One device's view from the test: what is live, guarded by the test.
struct DeviceModel {
  std::mutex mu;
  std::map<uintptr_t, Live> live;
};

size_t RandomSize(std::mt19937_64& rng, double max_log2 = 28.0) {
  // Log-uniform from 256 B to 256 MiB, so small requests dominate, as in
  // training, while large ones still come often.
  std::uniform_real_distribution<double> exponent(8.0, max_log2);
  return static_cast<size_t>(std::exp2(exponent(rng)));
}

// The pool's own books: every segment (a maximal mapped run) is tiled by
// its blocks, free neighbours have been coalesced, the segments add up to
// what is reserved and the allocated blocks to what is allocated.
void CheckSegments(DevicePool& pool, const PoolStats& s) {
  // Blocks in the front cache are free but not yet coalesced: flushed first.
  pool.FlushCache();
  size_t mapped = 0, allocated_blocks = 0;
  for (const SegmentInfo& seg : pool.Segments()) {
    mapped += seg.size;
    uintptr_t next = seg.address;
    const BlockInfo* previous = nullptr;
    for (const BlockInfo& b : seg.blocks) {
      ASSERT_EQ(b.address, next) << "blocks do not tile their segment";
      ASSERT_FALSE(previous != nullptr && !previous->allocated && !b.allocated)
          << "neighbouring free blocks at " << previous->address << " and " << b.address
          << " were not coalesced";
      previous = &b;
      next += b.size;
      allocated_blocks += b.allocated ? b.size : 0;
    }
    ASSERT_EQ(next, seg.address + seg.size);
  }
  ASSERT_EQ(s.reserved, mapped);
  ASSERT_EQ(s.allocated, allocated_blocks);
}

// Checks, under the model's lock (so no allocation or free of this device
// runs concurrently): blocks do not overlap, stats equal the sum of live
// requests (allocated: each rounded up as the pool rounds), reserved fits
// the device, and the pool's segments agree (CheckSegments).
void CheckDevice(DevicePool& pool, DeviceModel& model) {
  const PoolStats s = pool.stats();
  size_t requested = 0, rounded = 0;
  std::array<size_t, kNumTags> per_tag{};
  uintptr_t end = 0;
  for (const auto& [addr, live] : model.live) {
    ASSERT_GE(addr, end) << "live blocks overlap";
    end = addr + AlignUp(live.bytes, kRoundTo);
    requested += live.bytes;
    rounded += AlignUp(live.bytes, kRoundTo);
    per_tag[static_cast<int>(live.tag)] += live.bytes;
  }
  ASSERT_EQ(s.requested, requested);
  ASSERT_EQ(s.allocated, rounded);
  for (int t = 0; t < kNumTags; ++t) ASSERT_EQ(s.tags[t].current, per_tag[t]);
  ASSERT_LE(s.reserved, s.capacity);
  ASSERT_LE(s.allocated, s.reserved);
  CheckSegments(pool, s);
}

TEST(PoolRandomTest, InvariantsHoldUnderConcurrentChurn) {
  auto created = DeviceSystem::Create({DeviceSpec::Kind::kHost, kDevices, kCapacity},
                                      PoolOptions{.round_to = kRoundTo, .timeline_limit = 0});
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceSystem& system = **created;
  std::vector<DeviceModel> models(kDevices);

  auto worker = [&](int thread) {
    std::mt19937_64 rng(1000 + thread);
    for (int op = 0; op < kOpsPerThread; ++op) {
      const int d = static_cast<int>(rng() % kDevices);
      DeviceModel& model = models[d];
      std::lock_guard<std::mutex> lock(model.mu);
      const bool free_one = !model.live.empty() && (rng() % 2 == 0 || model.live.size() > 64);
      if (free_one) {
        auto it = model.live.begin();
        std::advance(it, rng() % model.live.size());
        ASSERT_TRUE(system.pool(d).Deallocate(reinterpret_cast<void*>(it->first),
                                              it->second.bytes).ok());
        model.live.erase(it);
      } else {
        const size_t bytes = RandomSize(rng);
        const Tag tag = static_cast<Tag>(rng() % kNumTags);
        auto p = system.pool(d).Allocate(bytes, tag);
        if (!p.ok()) {
          // Only a full device may refuse, and it must say so.
          ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
        } else {
          ASSERT_EQ(system.device_of(*p), d);
          static_cast<char*>(*p)[0] = 1;  // the memory is really there
          model.live[reinterpret_cast<uintptr_t>(*p)] = Live{bytes, tag};
        }
      }
      ASSERT_NO_FATAL_FAILURE(CheckDevice(system.pool(d), model)) << "device " << d;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& t : threads) t.join();

  for (int d = 0; d < kDevices; ++d) {
    for (const auto& [addr, live] : models[d].live) {
      ASSERT_TRUE(system.pool(d).Deallocate(reinterpret_cast<void*>(addr), live.bytes).ok());
    }
    ASSERT_TRUE(system.pool(d).Trim().ok());
    const PoolStats s = system.pool(d).stats();
    EXPECT_EQ(s.allocated, 0u);
    EXPECT_EQ(s.reserved, 0u) << "device " << d << " kept memory after a full trim";
    EXPECT_EQ(system.space().mapped_bytes(d), 0u);
  }
}

// The soak's stream work: writes `pattern` at sample points of a block (both
// ends, every MiB), or checks them. Runs on the block's stream, so a block
// reused before its earlier work is done shows up as a mismatch.
void TouchSamples(const Live& live, void* ptr, bool check, std::atomic<int>& mismatches) {
  auto* p = static_cast<unsigned char*>(ptr);
  auto touch = [&](size_t i) {
    if (!check) p[i] = live.pattern;
    if (check && p[i] != live.pattern) ++mismatches;
  };
  for (size_t i = 0; i < live.bytes; i += kMiB) touch(i);
  touch(live.bytes - 1);
}

class PoolSoak {
 public:
  explicit PoolSoak(DeviceSystem& system) : system_(system), models_(kDevices) {
    for (int d = 0; d < kDevices; ++d) {
      streams_.push_back({system.default_stream(d), *system.CreateStream(d),
                          *system.CreateStream(d)});
    }
  }

  // One random operation on a random device, then that device's invariants.
  void Step(std::mt19937_64& rng) {
    const int d = static_cast<int>(rng() % kDevices);
    DeviceModel& model = models_[d];
    std::lock_guard<std::mutex> lock(model.mu);
    const uint64_t r = rng() % 100;
    if (r < 2) {
      ASSERT_TRUE(system_.pool(d).Trim().ok());
      ++trims_;
    } else if (!model.live.empty() && (r < 50 || model.live.size() > 48)) {
      auto it = model.live.begin();
      std::advance(it, rng() % model.live.size());
      Free(d, it->first, it->second);
      model.live.erase(it);
    } else {
      Live live{RandomSize(rng, 23.0), static_cast<Tag>(rng() % kNumTags),
                streams_[d][rng() % 3], static_cast<unsigned char>(1 + rng() % 255)};
      auto p = system_.pool(d).Allocate(live.bytes, live.tag, live.stream);
      if (!p.ok()) {
        ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
        ++full_;
      } else {
        ASSERT_TRUE(live.stream->Enqueue([this, live, ptr = *p] {
          TouchSamples(live, ptr, false, mismatches_);
        }).ok());
        model.live[reinterpret_cast<uintptr_t>(*p)] = live;
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckDevice(system_.pool(d), model)) << "device " << d;
  }

  // Frees everything, waits for the streams, trims: nothing may be left.
  void Finish() {
    for (int d = 0; d < kDevices; ++d) {
      for (const auto& [addr, live] : models_[d].live) Free(d, addr, live);
      models_[d].live.clear();
      for (Stream* s : streams_[d]) ASSERT_TRUE(s->Synchronize().ok());
      ASSERT_TRUE(system_.pool(d).Trim().ok());
      const PoolStats s = system_.pool(d).stats();
      EXPECT_EQ(s.allocated, 0u) << "device " << d;
      EXPECT_EQ(s.reserved, 0u) << "device " << d << " kept memory after a full trim";
      EXPECT_EQ(system_.space().mapped_bytes(d), 0u) << "device " << d;
    }
    EXPECT_EQ(mismatches_.load(), 0) << "a block was reused before its stream's work ended";
    EXPECT_GT(full_.load(), 0) << "no allocation failed for capacity";
    EXPECT_GT(trims_.load(), 0);
  }

 private:
  void Free(int d, uintptr_t addr, const Live& live) {
    void* ptr = reinterpret_cast<void*>(addr);
    ASSERT_TRUE(live.stream->Enqueue([this, live, ptr] {
      TouchSamples(live, ptr, true, mismatches_);
    }).ok());
    ASSERT_TRUE(system_.pool(d).Deallocate(ptr, live.bytes, live.stream).ok());
  }

  DeviceSystem& system_;
  std::vector<DeviceModel> models_;
  std::vector<std::array<Stream*, 3>> streams_;  // per device: default and two more
  std::atomic<int> mismatches_{0}, full_{0}, trims_{0};
};

TEST(PoolRandomTest, SoakWithDelayedStreamsTrimsAndFullDevices) {
  const char* env = std::getenv("ZERO_SOAK_SECONDS");
  const absl::Duration length = absl::Seconds(env != nullptr ? std::atof(env) : 2.0);
  HostStreamOptions delayed{.delay_seed = 14, .max_delay = absl::Microseconds(50)};
  auto created = DeviceSystem::CreateWithHostStreams(
      {DeviceSpec::Kind::kHost, kDevices, 32 * kMiB}, delayed,
      PoolOptions{.round_to = kRoundTo, .timeline_limit = 0});
  ASSERT_TRUE(created.ok()) << created.status();
  PoolSoak soak(**created);
  const absl::Time end = absl::Now() + length;
  std::atomic<long> steps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(2000 + t);
      while (absl::Now() < end && !::testing::Test::HasFatalFailure()) {
        soak.Step(rng);
        ++steps;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  soak.Finish();
  std::printf("pool soak: %ld operations in %s\n", steps.load(),
              absl::FormatDuration(length).c_str());
}

}  // namespace
}  // namespace zero
