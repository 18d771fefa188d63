// Four threads page 32 random tensors of random bytes out and in, in random
// orders, through a budget far below their total: host reads and writes,
// reads and writes queued on compute streams, explicit moves, prefetch and
// recorded steps. Every tensor keeps its bytes (checksums), and the budget
// holds after every operation, in the pager's books and the device pool's.
// Again with the NVMe tier (file reads ahead and write-backs racing).
// The soak (ZERO_SOAK_SECONDS: run that long, at least kOpsPerThread per
// thread; bench/soak.sh runs minutes) does the same on streams in the delay
// mode while one thread changes the budget.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/units.h"
#include "gtest/gtest.h"
#include "absl/time/clock.h"
#include "memory/device_system.h"
#include "memory/stream_delay.h"
#include "offload/pager.h"

namespace zero {
namespace {

constexpr int kThreads = 4;
constexpr int kTensorsPerThread = 8;
constexpr int kOpsPerThread = 400;
constexpr size_t kBudget = kMiB;
// Every thread may hold one tensor of up to 96 KiB while another pages one
// in: the least budget the soak sets.
constexpr size_t kMinBudget = kBudget / 2;

// Deterministic contents from a seed: what a tensor should hold.
void FillFrom(uint64_t seed, void* data, size_t bytes) {
  std::mt19937_64 rng(seed);
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t word = rng();
    std::memcpy(p + i, &word, std::min<size_t>(8, bytes - i));
  }
}

uint64_t Checksum(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

uint64_t ChecksumOf(uint64_t seed, size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  FillFrom(seed, buffer.data(), bytes);
  return Checksum(buffer.data(), bytes);
}

struct Owned {
  TensorHandle handle;
  size_t bytes = 0;
  uint64_t checksum = 0;  // what it must hold once earlier work is done
};

class PagerStressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HostStreamOptions streams;
    if (soak_ > absl::ZeroDuration()) {
      streams = {.delay_seed = 14, .max_delay = absl::Microseconds(50)};
    }
    auto system = DeviceSystem::CreateWithHostStreams({DeviceSpec::Kind::kHost, 1, 64 * kMiB},
                                                      streams);
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    auto host = PinnedHostPool::Create(system_.get(), 16 * kMiB, {.arena_bytes = 4 * kMiB});
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    PagerOptions options{.budget_bytes = kBudget};
    if (nvme_) {  // staging for a few tensors per thread: write-backs and read-aheads race
      const char* tmp = std::getenv("TEST_TMPDIR");
      options.nvme_path = tmp != nullptr ? tmp : "/tmp";
      options.host_budget_bytes = 2 * kMiB;
    }
    auto pager = Pager::Create(system_.get(), 0, host_.get(), options);
    ASSERT_TRUE(pager.ok()) << pager.status();
    pager_ = std::move(*pager);
  }

  void CheckBudget() {
    const PagerStats s = pager_->stats();
    ASSERT_LE(s.device_bytes, s.budget);
    ASSERT_LE(s.device_bytes, kBudget);
    ASSERT_LE(s.peak_device_bytes, kBudget);
    ASSERT_LE(system_->pool(0).stats().requested, kBudget);
  }

  // One random operation on one of the thread's own tensors.
  void RandomOp(int thread, std::mt19937_64& rng, Stream* compute, Owned& t) {
    switch (rng() % 7) {
      case 0: {  // read on the host
        auto pin = pager_->Acquire(t.handle, nullptr, Access::kRead);
        ASSERT_TRUE(pin.ok()) << pin.status();
        ASSERT_EQ(Checksum(pin->data(), t.bytes), t.checksum);
        break;
      }
      case 1: {  // rewrite on the host
        auto pin = pager_->Acquire(t.handle, nullptr);
        ASSERT_TRUE(pin.ok()) << pin.status();
        ASSERT_EQ(Checksum(pin->data(), t.bytes), t.checksum);
        const uint64_t seed = rng();
        FillFrom(seed, pin->data(), t.bytes);
        t.checksum = Checksum(pin->data(), t.bytes);
        break;
      }
      case 2: {  // check and rewrite on a compute stream, still queued at release
        auto pin = pager_->Acquire(t.handle, compute);
        ASSERT_TRUE(pin.ok()) << pin.status();
        const uint64_t seed = rng();
        const uint64_t expected = t.checksum;
        t.checksum = ChecksumOf(seed, t.bytes);
        void* data = pin->data();
        const size_t bytes = t.bytes;
        ASSERT_TRUE(compute->Enqueue([this, data, bytes, seed, expected] {
          if (Checksum(data, bytes) != expected) ++stream_mismatches_;
          FillFrom(seed, data, bytes);
        }).ok());
        break;
      }
      case 3:
        ASSERT_TRUE(pager_->PageOut(t.handle, nvme_ && rng() % 2 ? Residency::kNvme
                                                                  : Residency::kHost)
                        .ok());
        break;
      case 4:
        ASSERT_TRUE(pager_->PageIn(t.handle).ok());
        break;
      case 5: {
        auto started = pager_->Prefetch(1 + rng() % 3);
        ASSERT_TRUE(started.ok()) << started.status();
        break;
      }
      default:  // only thread 0 opens and closes steps, so they never nest
        if (thread == 0) {
          ASSERT_TRUE((in_step_ ? pager_->EndStep() : pager_->BeginStep()).ok());
          in_step_ = !in_step_;
        }
        if (thread == 1 && soak_ > absl::ZeroDuration()) {  // the budget moves under the others
          const size_t budget = kMinBudget + rng() % (kBudget - kMinBudget + 1);
          absl::Status s = pager_->SetBudget(budget);
          ASSERT_TRUE(s.ok()) << s;
          ASSERT_LE(pager_->stats().device_bytes, kBudget);
        }
        break;
    }
  }

  void RunAndCheck();
  void PrefetchARecordedStep(const std::vector<Owned>& mine);

  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<PinnedHostPool> host_;
  std::unique_ptr<Pager> pager_;
  std::atomic<int> stream_mismatches_{0};
  bool in_step_ = false;  // thread 0 only
  absl::Duration soak_;   // zero: the short run
  bool nvme_ = false;     // the pager's NVMe tier under the host tier
};

void PagerStressTest::RunAndCheck() {
  std::vector<std::vector<Owned>> owned(kThreads);
  std::mt19937_64 setup(2024);
  for (int th = 0; th < kThreads; ++th) {
    for (int i = 0; i < kTensorsPerThread; ++i) {
      Owned t;
      t.bytes = 1 + setup() % (96 * kKiB);  // odd sizes too
      auto h = pager_->Register(t.bytes, static_cast<Tag>(i % kNumTags),
                                "t" + std::to_string(th) + "." + std::to_string(i));
      ASSERT_TRUE(h.ok()) << h.status();
      t.handle = *h;
      auto pin = pager_->Acquire(t.handle, nullptr);
      ASSERT_TRUE(pin.ok()) << pin.status();
      FillFrom(setup(), pin->data(), t.bytes);
      t.checksum = Checksum(pin->data(), t.bytes);
      owned[th].push_back(t);
    }
  }
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([this, th, &owned] {
      std::mt19937_64 rng(th + 1);
      Stream* compute = *system_->CreateStream(0);
      const absl::Time end = absl::Now() + soak_;
      for (int op = 0; (op < kOpsPerThread || absl::Now() < end) && !HasFatalFailure(); ++op) {
        RandomOp(th, rng, compute, owned[th][rng() % kTensorsPerThread]);
        CheckBudget();
      }
      ASSERT_TRUE(compute->Synchronize().ok());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_FALSE(HasFatalFailure());
  PrefetchARecordedStep(owned[0]);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(stream_mismatches_.load(), 0) << "a stream saw bytes it did not expect";
  for (const auto& mine : owned) {
    for (const Owned& t : mine) {
      auto pin = pager_->Acquire(t.handle, nullptr, Access::kRead);
      ASSERT_TRUE(pin.ok()) << pin.status();
      EXPECT_EQ(Checksum(pin->data(), t.bytes), t.checksum);
    }
  }
  const PagerStats s = pager_->stats();
  if (soak_ > absl::ZeroDuration()) {
    std::printf("pager soak: %s: %llu page-ins, %llu page-outs, %llu evictions\n",
                absl::FormatDuration(soak_).c_str(), static_cast<unsigned long long>(s.page_ins),
                static_cast<unsigned long long>(s.page_outs),
                static_cast<unsigned long long>(s.evictions));
  }
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.bytes_paged_out, 0u);
  EXPECT_GT(s.bytes_paged_in, 0u);
  EXPECT_GT(s.prefetches, 0u);
  if (nvme_) {
    EXPECT_GT(s.read_aheads, 0u);
    EXPECT_GT(s.file_reads, 0u);
  }
  EXPECT_EQ(s.device_bytes + s.host_bytes + s.nvme_bytes, [&] {
    size_t total = 0;
    for (const auto& mine : owned) for (const Owned& t : mine) total += t.bytes;
    return total;
  }());
  CheckBudget();
}

// Whether the random threads ever prefetched depends on how they interleaved
// (a recorded step, then a Prefetch while its tensors were paged out): this
// makes it certain. One step over `mine` is recorded, each tensor is paged
// out (every other one to the file on the NVMe tier), and Prefetch at the
// start of the next step brings them up again, host copies as prefetches,
// file-only ones as reads ahead; the bytes are checked as they are used.
void PagerStressTest::PrefetchARecordedStep(const std::vector<Owned>& mine) {
  if (in_step_) {
    ASSERT_TRUE(pager_->EndStep().ok());
  }
  in_step_ = false;
  ASSERT_TRUE(pager_->BeginStep().ok());
  for (const Owned& t : mine) ASSERT_TRUE(pager_->Acquire(t.handle, nullptr, Access::kRead).ok());
  ASSERT_TRUE(pager_->EndStep().ok());
  for (size_t i = 0; i < mine.size(); ++i) {
    const Residency to = nvme_ && i % 2 == 1 ? Residency::kNvme : Residency::kHost;
    ASSERT_TRUE(pager_->PageOut(mine[i].handle, to).ok());
  }
  ASSERT_TRUE(pager_->BeginStep().ok());
  absl::StatusOr<int> started = pager_->Prefetch(static_cast<int>(mine.size()));
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_GT(*started, 0);
  for (const Owned& t : mine) {
    auto pin = pager_->Acquire(t.handle, nullptr, Access::kRead);
    ASSERT_TRUE(pin.ok()) << pin.status();
    ASSERT_EQ(Checksum(pin->data(), t.bytes), t.checksum);
  }
  ASSERT_TRUE(pager_->EndStep().ok());
}

TEST_F(PagerStressTest, RandomMovesFromFourThreadsKeepBytesWithinBudget) { RunAndCheck(); }

// The same over the NVMe tier: page-outs to the file, write-backs that make
// room in the staging, and Prefetch's reads on the I/O thread, all at once.
class PagerStressNvmeTest : public PagerStressTest {
 protected:
  void SetUp() override {
    nvme_ = true;
    PagerStressTest::SetUp();
  }
};

TEST_F(PagerStressNvmeTest, RandomMovesThroughTheFileKeepBytesWithinBudgets) { RunAndCheck(); }

// Streams in the delay mode and a budget that moves between kMinBudget and
// kBudget while the others page: ZERO_SOAK_SECONDS (default 1) of it.
class PagerSoakTest : public PagerStressTest {
 protected:
  void SetUp() override {
    const char* seconds = std::getenv("ZERO_SOAK_SECONDS");
    soak_ = absl::Seconds(seconds != nullptr ? std::atof(seconds) : 1.0);
    PagerStressTest::SetUp();
  }
};

TEST_F(PagerSoakTest, DelayedStreamsAndAMovingBudgetKeepBytesWithinBudget) { RunAndCheck(); }

}  // namespace
}  // namespace zero
