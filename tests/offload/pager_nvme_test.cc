// The pager's NVMe tier on host devices, with its file under TEST_TMPDIR:
// bytes survive device -> host -> file and back bit for bit, the device and
// host staging budgets hold after every call, host eviction follows the
// recorded order, prefetch reads ahead from the file, and a file that fails
// (full disk, changed underneath) is a clear error that loses nothing.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "base/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "offload/pager.h"

namespace zero {
namespace {

using ::testing::HasSubstr;

constexpr size_t kUnit = kMiB;

// A fresh folder per test, so each can find its pager's one file.
std::string FreshFolder(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string folder = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(folder.c_str(), 0755);
  return folder;
}

std::vector<std::string> FilesIn(const std::string& folder) {
  std::vector<std::string> files;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) return files;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') files.push_back(folder + "/" + entry->d_name);
  }
  closedir(dir);
  return files;
}

unsigned char PatternByte(size_t i, int seed) { return (i * 31 + seed * 17 + (i >> 12)) & 0xFF; }

class PagerNvmeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto system = DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 64 * kMiB});
    ASSERT_TRUE(system.ok()) << system.status();
    system_ = std::move(*system);
    auto host = PinnedHostPool::Create(system_.get(), 64 * kMiB, {.arena_bytes = 16 * kMiB});
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    folder_ = FreshFolder(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    ExpectWithinBudgets();
    pager_.reset();
    EXPECT_TRUE(FilesIn(folder_).empty()) << "the pager removes its file";
  }

  void MakePager(size_t device_budget, size_t host_budget) {
    options_.budget_bytes = device_budget;
    options_.nvme_path = folder_;
    options_.host_budget_bytes = host_budget;
    auto pager = Pager::Create(system_.get(), 0, host_.get(), options_);
    ASSERT_TRUE(pager.ok()) << pager.status();
    pager_ = std::move(*pager);
  }

  // Device and host: the pager's books and the pools it draws from.
  void ExpectWithinBudgets() {
    if (pager_ == nullptr) return;
    const PagerStats s = pager_->stats();
    EXPECT_LE(s.device_bytes, s.budget);
    EXPECT_LE(system_->pool(0).stats().requested, s.budget);
    EXPECT_LE(s.staging_bytes, s.host_budget);
    EXPECT_LE(s.peak_staging_bytes, s.host_budget);
    EXPECT_LE(host_->stats().requested, s.host_budget);
  }

  TensorHandle Register(const std::string& name, size_t bytes = kUnit) {
    auto h = pager_->Register(bytes, Tag::kOptimizerState, name);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : TensorHandle{};
  }
  absl::Status Use(TensorHandle h, Access access = Access::kReadWrite) {
    auto pin = pager_->Acquire(h, nullptr, access);
    ExpectWithinBudgets();
    return pin.status();
  }
  absl::Status Write(TensorHandle h, int seed) {
    auto pin = pager_->Acquire(h, nullptr);
    ExpectWithinBudgets();
    if (!pin.ok()) return pin.status();
    auto* p = static_cast<unsigned char*>(pin->data());
    for (size_t i = 0; i < pin->bytes(); ++i) p[i] = PatternByte(i, seed);
    return absl::OkStatus();
  }
  // Empty when `h` holds the pattern of `seed`; else what went wrong.
  std::string Check(TensorHandle h, int seed) {
    auto pin = pager_->Acquire(h, nullptr, Access::kRead);
    ExpectWithinBudgets();
    if (!pin.ok()) return std::string(pin.status().message());
    const auto* p = static_cast<const unsigned char*>(pin->data());
    for (size_t i = 0; i < pin->bytes(); ++i) {
      if (p[i] != PatternByte(i, seed)) return "differs at byte " + std::to_string(i);
    }
    return "";
  }
  Residency Where(TensorHandle h) { return pager_->residency(h).value(); }
  // Tensors A, B, C holding patterns 0, 1, 2, all in the file, with a
  // recorded step that uses them in that order; a new step has used A.
  std::vector<TensorHandle> ThreeInTheFile() {
    std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C")};
    EXPECT_TRUE(pager_->BeginStep().ok());
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(Write(t[i], i).ok());
    EXPECT_TRUE(pager_->EndStep().ok());
    for (TensorHandle h : t) EXPECT_TRUE(pager_->PageOut(h, Residency::kNvme).ok());
    EXPECT_TRUE(pager_->BeginStep().ok());
    EXPECT_EQ(Check(t[0], 0), "");
    return t;
  }

  std::unique_ptr<DeviceSystem> system_;
  std::unique_ptr<PinnedHostPool> host_;
  std::string folder_;
  PagerOptions options_;
  std::unique_ptr<Pager> pager_;
};

TEST_F(PagerNvmeTest, TensorsStartInTheFileWithoutHostMemory) {
  MakePager(2 * kUnit, 2 * kUnit);
  TensorHandle a = Register("a");
  EXPECT_EQ(Where(a), Residency::kNvme);
  EXPECT_EQ(pager_->stats().nvme_bytes, kUnit);
  EXPECT_EQ(host_->stats().requested, 0u) << "no home block in host memory";
  ASSERT_EQ(FilesIn(folder_).size(), 1u);
  ASSERT_TRUE(Use(a).ok());
  EXPECT_EQ(pager_->stats().file_reads, 0u) << "nothing to read before the first write";
  EXPECT_EQ(Where(a), Residency::kDevice);
}

TEST_F(PagerNvmeTest, BytesSurviveEveryTierBitForBit) {
  MakePager(2 * kUnit, 2 * kUnit);
  // Eight tensors through two device and two staging slots; one of an odd
  // size, so the file's padding is exercised.
  std::vector<TensorHandle> t;
  for (int i = 0; i < 8; ++i) t.push_back(Register("t" + std::to_string(i), i == 5 ? kUnit - 123 : kUnit));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 8; ++i) {
      if (round > 0) {
        ASSERT_EQ(Check(t[i], round * 10 + i - 10), "") << "tensor " << i;
      }
      ASSERT_TRUE(Write(t[i], round * 10 + i).ok());
    }
  }
  ASSERT_TRUE(pager_->PageOut(t[0], Residency::kNvme).ok());
  EXPECT_EQ(Where(t[0]), Residency::kNvme);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(Check(t[i], 20 + i), "") << "tensor " << i;
  const PagerStats s = pager_->stats();
  EXPECT_GT(s.file_writes, 0u);
  EXPECT_GT(s.file_reads, 0u);
  EXPECT_EQ(s.device_bytes + s.host_bytes + s.nvme_bytes, 7 * kUnit + kUnit - 123);
}

TEST_F(PagerNvmeTest, ACleanTensorIsNotWrittenAgain) {
  MakePager(2 * kUnit, 2 * kUnit);
  TensorHandle a = Register("a");
  ASSERT_TRUE(Write(a, 1).ok());
  ASSERT_TRUE(pager_->PageOut(a, Residency::kNvme).ok());
  EXPECT_EQ(pager_->stats().file_writes, 1u);
  EXPECT_EQ(Check(a, 1), "");
  EXPECT_EQ(pager_->stats().staging_bytes, 0u) << "a clean staging block goes after the copy up";
  ASSERT_TRUE(pager_->PageOut(a, Residency::kNvme).ok());
  EXPECT_EQ(Where(a), Residency::kNvme);
  EXPECT_EQ(pager_->stats().file_writes, 1u) << "read only since: the file still holds it";
  EXPECT_EQ(Check(a, 1), "");
}

// One device slot, three staging slots. In the replayed step, at position 4
// (C comes back) a staging block must go: A is next used at 5, B at 6, so
// Belady writes back B, where least-recently-used would take A.
TEST_F(PagerNvmeTest, HostEvictionFollowsTheRecordedOrder) {
  MakePager(kUnit, 3 * kUnit);
  std::map<char, TensorHandle> t;
  for (char c : std::string("ABCD")) t[c] = Register(std::string(1, c));
  const std::string order = "ABCDCAB";
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(pager_->BeginStep().ok());
    for (size_t i = 0; i < order.size(); ++i) {
      ASSERT_TRUE(Use(t[order[i]]).ok());
      if (step == 1 && i == 4) {
        EXPECT_EQ(Where(t['A']), Residency::kHost);
        EXPECT_EQ(Where(t['B']), Residency::kNvme);
        EXPECT_EQ(Where(t['D']), Residency::kHost);
      }
    }
    ASSERT_TRUE(pager_->EndStep().ok());
    for (auto& [c, h] : t) ASSERT_TRUE(pager_->PageOut(h, Residency::kNvme).ok());
  }
}

TEST_F(PagerNvmeTest, PrefetchReadsAheadFromTheFile) {
  MakePager(2 * kUnit, 2 * kUnit);
  const std::vector<TensorHandle> t = ThreeInTheFile();
  const uint64_t reads = pager_->stats().file_reads;
  EXPECT_EQ(*pager_->Prefetch(1), 1) << "B's read started";
  EXPECT_EQ(Where(t[1]), Residency::kHost) << "staged for the read, not yet copied up";
  // The read runs on the pager's I/O thread: until it is done, Prefetch
  // leaves B be; then it copies B up.
  int started = 0;
  for (int i = 0; i < 5000 && started == 0; ++i) {
    started = *pager_->Prefetch(1);
    if (started == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(started, 1) << "B, read, is copied up";
  EXPECT_EQ(pager_->stats().read_aheads, 1u);
  EXPECT_EQ(pager_->stats().prefetches, 1u);
  EXPECT_EQ(pager_->stats().file_reads, reads + 1) << "B came from the file";
  EXPECT_EQ(Where(t[1]), Residency::kDevice);
  const PagerStats before = pager_->stats();
  EXPECT_EQ(Check(t[1], 1), "");
  EXPECT_EQ(pager_->stats().page_ins, before.page_ins) << "the acquire found B resident";
  EXPECT_EQ(pager_->stats().file_reads, reads + 1) << "B was read once";
  ASSERT_TRUE(pager_->EndStep().ok());
}

// A read ahead held on the disk: Prefetch returns, the pager serves other
// tensors meanwhile (the read is not under its lock), and B's Acquire
// waits for the read and uses it (one read of B in all).
TEST_F(PagerNvmeTest, APrefetchedReadRunsWhileThePagerServesOthers) {
  std::atomic<bool> hold{false}, release{false}, let_go{false};
  std::atomic<int> held{0};
  options_.nvme_read_fault = [&](uint64_t, size_t) {
    if (hold) {
      ++held;
      for (int i = 0; i < 5000 && !release; ++i) absl::SleepFor(absl::Milliseconds(1));
      let_go = true;  // by the test, or by the 5 s deadline
    }
    return absl::OkStatus();
  };
  MakePager(2 * kUnit, 3 * kUnit);
  const std::vector<TensorHandle> t = ThreeInTheFile();
  const uint64_t reads = pager_->stats().file_reads;
  hold = true;
  EXPECT_EQ(*pager_->Prefetch(1), 1);
  for (int i = 0; i < 5000 && held == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(held, 1) << "B's read reached the disk";
  EXPECT_EQ(Check(t[0], 0), "") << "A, on the device, while B's read is held";
  EXPECT_TRUE(pager_->residency(t[2]).ok());
  EXPECT_FALSE(let_go) << "Prefetch, or A's acquire, waited for B's read";
  // B's acquire waits for the read, outside the pager's lock: meanwhile
  // A is served again (the wait begins well within the 200 ms given).
  hold = false;
  std::string b;
  std::thread acquirer([&] { b = Check(t[1], 1); });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(Check(t[0], 0), "");
  EXPECT_FALSE(let_go) << "A's acquire waited behind B's, under the lock";
  release = true;
  acquirer.join();
  EXPECT_EQ(b, "") << "B's acquire used its read";
  EXPECT_EQ(pager_->stats().file_reads, reads + 1);
  EXPECT_EQ(pager_->stats().read_aheads, 1u);
  ASSERT_TRUE(pager_->EndStep().ok());
}

// A read ahead that fails is dropped: B stays in the file, its Acquire
// reads again; when the disk keeps failing, the Acquire says so.
TEST_F(PagerNvmeTest, AFailedReadAheadLeavesTheTensorInTheFile) {
  std::atomic<int> failures{0};
  options_.nvme_read_fault = [&](uint64_t, size_t) {
    if (failures == 0) return absl::OkStatus();
    --failures;
    return absl::DataLossError("the disk refused the read");
  };
  MakePager(2 * kUnit, 2 * kUnit);
  const std::vector<TensorHandle> t = ThreeInTheFile();
  failures = 1;
  EXPECT_EQ(*pager_->Prefetch(1), 1);
  EXPECT_EQ(Check(t[1], 1), "") << "read again by the acquire";
  ASSERT_TRUE(pager_->EndStep().ok());
  ASSERT_TRUE(pager_->PageOut(t[1], Residency::kNvme).ok());
  ASSERT_TRUE(pager_->BeginStep().ok());
  ASSERT_EQ(Check(t[0], 0), "");
  failures = 2;  // the read ahead, then the acquire's
  EXPECT_EQ(*pager_->Prefetch(1), 1);
  const std::string failed = Check(t[1], 1);
  EXPECT_THAT(failed, HasSubstr("the disk refused the read"));
  EXPECT_THAT(failed, HasSubstr("'B'"));
  EXPECT_EQ(Where(t[1]), Residency::kNvme);
  EXPECT_EQ(Check(t[1], 1), "") << "and reads it once the disk does";
  EXPECT_EQ(pager_->stats().read_aheads, 2u);
  EXPECT_EQ(pager_->stats().failed_read_aheads, 2u);
  ASSERT_TRUE(pager_->EndStep().ok());
}

// The disk fills mid-run: the write-back that makes room fails, the acquire
// that needed it says why, and every tensor still holds its bytes.
// With an unlimited device budget, a tensor of 2^64 - 100 bytes passed
// the host check (its padded size wrapped to 0) and shared its file slot
// with the next tensor.
TEST_F(PagerNvmeTest, ATensorNoFileCanHoldIsRefused) {
  MakePager(~size_t{0}, 8 * kUnit);
  auto huge = pager_->Register(~size_t{0} - 100, Tag::kOther, "huge");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << huge.status();
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("host staging budget"));
  const TensorHandle a = Register("A");
  ASSERT_TRUE(Write(a, 1).ok());
  ASSERT_TRUE(pager_->PageOut(a, Residency::kNvme).ok());
  EXPECT_EQ(Check(a, 1), "");
}

TEST_F(PagerNvmeTest, ADiskFullWriteBackIsAClearErrorThatLosesNothing) {
  bool full = false;
  options_.nvme_write_fault = [&full](uint64_t, size_t) {
    return full ? absl::ResourceExhaustedError("no space left on device (injected)")
                : absl::OkStatus();
  };
  MakePager(kUnit, 2 * kUnit);
  std::vector<TensorHandle> t = {Register("A"), Register("B"), Register("C"), Register("D")};
  ASSERT_TRUE(Write(t[0], 0).ok());
  ASSERT_TRUE(Write(t[1], 1).ok());
  ASSERT_TRUE(Write(t[2], 2).ok());  // A and B staged, C on the device
  full = true;
  absl::Status d = Write(t[3], 3);
  EXPECT_EQ(d.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(d.message()), HasSubstr("writing back tensor"));
  EXPECT_THAT(std::string(d.message()), HasSubstr("no space left"));
  absl::Status out = pager_->PageOut(t[1], Residency::kNvme);
  EXPECT_EQ(out.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Where(t[1]), Residency::kHost) << "the data stays in its staging block";
  full = false;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Check(t[i], i), "") << "tensor " << i;
  ASSERT_TRUE(Write(t[3], 3).ok());
  EXPECT_EQ(Check(t[3], 3), "");
}

TEST_F(PagerNvmeTest, AFileChangedUnderneathIsDataLossAndKeepsTheTensorThere) {
  MakePager(2 * kUnit, 2 * kUnit);
  TensorHandle a = Register("a"), b = Register("b");
  ASSERT_TRUE(Write(a, 1).ok());
  ASSERT_TRUE(Write(b, 2).ok());
  ASSERT_TRUE(pager_->PageOut(a, Residency::kNvme).ok());
  ASSERT_TRUE(pager_->PageOut(b, Residency::kNvme).ok());
  const std::vector<std::string> files = FilesIn(folder_);
  ASSERT_EQ(files.size(), 1u);
  const int fd = open(files[0].c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const char flip = 0x7E;
  ASSERT_EQ(pwrite(fd, &flip, 1, 1000), 1);  // inside a's slot, the first
  close(fd);
  auto pin = pager_->Acquire(a, nullptr);
  EXPECT_EQ(pin.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(pin.status().message()), HasSubstr("tensor 'a'"));
  EXPECT_THAT(std::string(pin.status().message()), HasSubstr("changed underneath"));
  EXPECT_EQ(Where(a), Residency::kNvme);
  EXPECT_EQ(pager_->stats().staging_bytes, 0u) << "the failed read's block went back";
  EXPECT_EQ(Check(b, 2), "") << "the other slot is intact";
}

TEST_F(PagerNvmeTest, BadOptionsAndSizesAreClearErrors) {
  options_ = {.budget_bytes = kUnit, .nvme_path = folder_ + "/missing/deeper"};
  options_.host_budget_bytes = 2 * kUnit;
  auto missing = Pager::Create(system_.get(), 0, host_.get(), options_);
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(folder_ + "/missing/deeper"));
  options_.host_budget_bytes = 0;
  options_.nvme_path = folder_;
  EXPECT_EQ(Pager::Create(system_.get(), 0, host_.get(), options_).status().code(),
            absl::StatusCode::kInvalidArgument);

  MakePager(2 * kUnit, 2 * kUnit);
  auto big = pager_->Register(kUnit + 1, Tag::kOther, "big");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("half the host staging budget"));

  auto plain = Pager::Create(system_.get(), 0, host_.get(), {.budget_bytes = kUnit});
  ASSERT_TRUE(plain.ok());
  TensorHandle h = *(*plain)->Register(kUnit, Tag::kOther, "h");
  EXPECT_EQ((*plain)->PageOut(h, Residency::kNvme).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*plain)->PageOut(h, Residency::kDevice).code(), absl::StatusCode::kInvalidArgument);
}

// Meta devices: the same moves and books, no file and no bytes.
TEST(PagerNvmeMetaTest, MovesAreBookkeepingOnly) {
  const std::string folder = FreshFolder("meta");
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 80 * kGiB});
  ASSERT_TRUE(system.ok());
  auto host = PinnedHostPool::Create(system->get(), size_t{1} << 40);
  ASSERT_TRUE(host.ok());
  auto pager = Pager::Create(system->get(), 0, host->get(),
                             {.budget_bytes = 40 * kGiB, .nvme_path = folder,
                              .host_budget_bytes = 40 * kGiB});
  ASSERT_TRUE(pager.ok()) << pager.status();
  EXPECT_TRUE(FilesIn(folder).empty());
  std::vector<TensorHandle> t;
  for (int i = 0; i < 8; ++i) t.push_back(*(*pager)->Register(20 * kGiB, Tag::kParameters, "w"));
  for (int round = 0; round < 3; ++round) {
    for (TensorHandle h : t) {
      auto pin = (*pager)->Acquire(h, (*system)->default_stream(0));
      ASSERT_TRUE(pin.ok()) << pin.status();
    }
  }
  const PagerStats s = (*pager)->stats();
  EXPECT_LE(s.peak_device_bytes, 40 * kGiB);
  EXPECT_LE(s.peak_staging_bytes, 40 * kGiB);
  EXPECT_GT(s.file_writes, 0u) << "the books count write-backs";
  EXPECT_GT(s.file_reads, 0u);
  EXPECT_TRUE(FilesIn(folder).empty());
}

}  // namespace
}  // namespace zero
