// The pager's NVMe tier read-ahead, in one run: a step that acquires 16
// tensors of 8 MiB in the recorded order, each from the file, and computes
// over each (a memory-bound pass repeated until it takes about as long as
// reading the tensor), with Prefetch(2) before each acquire and without.
// The limits, measured in the same rounds: the tensors' bytes read with
// O_DIRECT one request at a time (read), and the compute over them in
// memory (compute). Printed: each step over read + compute (1 is no
// overlap at all; max(read, compute) / (read + compute), about 0.5 here,
// is full overlap) and the share of the shorter limit the read-ahead hid.
//
// Run: bazel run -c opt //bench:pager_nvme_bench [-- --report_only]
// The file goes to $ZERO_NVME_DIR (default /tmp); put it on the NVMe drive.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/direct_file.h"
#include "base/status_macros.h"
#include "base/units.h"
#include "bench/ratio_reporter.h"
#include "bench/simulated_devices.h"
#include "benchmark/benchmark.h"
#include "memory/device_system.h"
#include "offload/host_pool.h"
#include "offload/pager.h"

namespace zero {
namespace {

constexpr int kTensors = 16;
constexpr size_t kTensorBytes = 8 * kMiB;
constexpr int kLookahead = 2;  // Prefetch(2) before each acquire
constexpr int kRounds = 5;

std::string Folder() {
  const char* dir = std::getenv("ZERO_NVME_DIR");
  return dir != nullptr ? dir : "/tmp";
}

// The compute per tensor: `passes` memory-bound reads of its words.
uint64_t Compute(const void* data, int passes) {
  const auto* words = static_cast<const uint64_t*>(data);
  uint64_t sum = 0;
  for (int p = 0; p < passes; ++p) {
    for (size_t i = 0; i < kTensorBytes / 8; ++i) sum += words[i] ^ static_cast<uint64_t>(p);
  }
  return sum;
}

double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Passes that make one tensor's compute take about as long as its read
// here: the step is then the case where overlap matters most.
absl::StatusOr<int> CalibratePasses() {
  ASSIGN_OR_RETURN(AlignedBuffer buffer, AllocateAlignedBuffer(kTensorBytes));
  const std::string path = Folder() + "/zero_pager_nvme_bench.calibrate";
  ASSIGN_OR_RETURN(DirectFile file, DirectFile::Open(path, FileMode::kWrite));
  std::memset(buffer.get(), 3, kTensorBytes);
  double read = 1e30, pass = 1e30;
  absl::Status io;
  for (int i = 0; i < 4 && io.ok(); ++i) {
    io = file.WriteAt(0, buffer.get(), kTensorBytes);
    read = std::min(read, Seconds([&] {
                      if (io.ok()) io = file.ReadAt(0, buffer.get(), kTensorBytes);
                    }));
    pass = std::min(pass, Seconds([&] { benchmark::DoNotOptimize(Compute(buffer.get(), 1)); }));
  }
  std::remove(path.c_str());
  RETURN_IF_ERROR(io);
  return std::max(1, static_cast<int>(read / pass + 0.5));
}

void BM_Read(benchmark::State& state) {
  const std::string path = Folder() + "/zero_pager_nvme_bench.limit";
  absl::StatusOr<DirectFile> file = DirectFile::Open(path, FileMode::kWrite);
  if (!file.ok()) return state.SkipWithError(file.status().ToString().c_str());
  std::vector<AlignedBuffer> buffers;  // as many as the pager stages at once
  for (int b = 0; b <= kLookahead; ++b) {
    absl::StatusOr<AlignedBuffer> buffer = AllocateAlignedBuffer(kTensorBytes);
    if (!buffer.ok()) return state.SkipWithError(buffer.status().ToString().c_str());
    std::memset(buffer->get(), 1, kTensorBytes);
    buffers.push_back(*std::move(buffer));
  }
  for (int i = 0; i < kTensors; ++i) {
    absl::Status s = file->WriteAt(i * kTensorBytes, buffers[0].get(), kTensorBytes);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
  }
  for (auto _ : state) {
    for (int i = 0; i < kTensors; ++i) {
      absl::Status s =
          file->ReadAt(i * kTensorBytes, buffers[i % buffers.size()].get(), kTensorBytes);
      if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
    }
  }
  state.SetLabel(file->direct() ? "O_DIRECT" : "buffered (the filesystem refused O_DIRECT)");
  std::remove(path.c_str());
}

void BM_Compute(benchmark::State& state, int passes) {
  std::vector<std::vector<uint64_t>> tensors(kTensors,
                                             std::vector<uint64_t>(kTensorBytes / 8, 7));
  for (auto _ : state) {
    for (const auto& t : tensors) benchmark::DoNotOptimize(Compute(t.data(), passes));
  }
}

struct PagedSetup {
  std::unique_ptr<DeviceSystem> system;
  std::unique_ptr<PinnedHostPool> host;
  std::unique_ptr<Pager> pager;
  std::vector<TensorHandle> tensors;
};

// Every tensor written once and paged out to the file, and one step
// recorded, so Prefetch has an order to follow.
absl::StatusOr<PagedSetup> MakePaged() {
  PagedSetup s;
  ASSIGN_OR_RETURN(s.system,
                   DeviceSystem::Create(SimulatedDevices(DeviceSpec::Kind::kHost, 1, 64 * kMiB)));
  ASSIGN_OR_RETURN(s.host, PinnedHostPool::Create(s.system.get(), 64 * kMiB));
  PagerOptions options;  // by name: a brace list would leave the fault hooks unnamed
  options.budget_bytes = (kLookahead + 1) * kTensorBytes;
  options.nvme_path = Folder();
  options.host_budget_bytes = 2 * (kLookahead + 1) * kTensorBytes;
  ASSIGN_OR_RETURN(s.pager, Pager::Create(s.system.get(), 0, s.host.get(), options));
  RETURN_IF_ERROR(s.pager->BeginStep());
  for (int i = 0; i < kTensors; ++i) {
    ASSIGN_OR_RETURN(TensorHandle h, s.pager->Register(kTensorBytes, Tag::kOther, "t"));
    ASSIGN_OR_RETURN(Pager::Pin pin, s.pager->Acquire(h, nullptr));
    std::memset(pin.data(), i, kTensorBytes);
    s.tensors.push_back(h);
  }
  RETURN_IF_ERROR(s.pager->EndStep());
  for (TensorHandle h : s.tensors) RETURN_IF_ERROR(s.pager->PageOut(h, Residency::kNvme));
  return s;
}

void BM_PagedStep(benchmark::State& state, int passes, bool prefetch) {
  absl::StatusOr<PagedSetup> s = MakePaged();
  if (!s.ok()) return state.SkipWithError(s.status().ToString().c_str());
  Pager& pager = *s->pager;
  for (auto _ : state) {
    absl::Status status = pager.BeginStep();
    for (int i = 0; i < kTensors && status.ok(); ++i) {
      if (prefetch) status = pager.Prefetch(kLookahead).status();
      absl::StatusOr<Pager::Pin> pin = pager.Acquire(s->tensors[i], nullptr, Access::kRead);
      if (!pin.ok()) status = pin.status();
      if (status.ok()) benchmark::DoNotOptimize(Compute(pin->data(), passes));
    }
    if (status.ok()) status = pager.EndStep();
    state.PauseTiming();  // back to the file, clean: nothing written
    for (TensorHandle h : s->tensors) {
      if (status.ok()) status = pager.PageOut(h, Residency::kNvme);
    }
    state.ResumeTiming();
    if (!status.ok()) return state.SkipWithError(status.ToString().c_str());
  }
  const PagerStats stats = pager.stats();
  state.counters["file_reads_per_step"] =
      static_cast<double>(stats.file_reads) / static_cast<double>(state.iterations());
}

// `passes`: the compute per tensor (CalibratePasses).
void RegisterRounds(int passes) {
  auto add = [](const std::string& name, auto fn, auto... args) {
    benchmark::RegisterBenchmark(name.c_str(), fn, args...)
        ->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
  };
  for (int r = 0; r < kRounds; ++r) {
    add(absl::StrFormat("BM_Read/round:%d", r), BM_Read);
    add(absl::StrFormat("BM_Prefetched/round:%d", r), BM_PagedStep, passes, true);
    add(absl::StrFormat("BM_Compute/round:%d", r), BM_Compute, passes);
    add(absl::StrFormat("BM_NotPrefetched/round:%d", r), BM_PagedStep, passes, false);
  }
}

struct Round {
  double read, compute, prefetched, not_prefetched;
};

// The round whose prefetched step over read + compute is the median.
Round MedianRound(const RatioReporter& reporter) {
  std::vector<Round> rounds;
  for (int r = 0; r < kRounds; ++r) {
    auto seconds = [&](const char* what, const char* arg) {
      return reporter.seconds(
          absl::StrFormat("%s/round:%d%s/min_time:0.500/real_time", what, r, arg));
    };
    Round round{seconds("BM_Read", ""), seconds("BM_Compute", ""), seconds("BM_Prefetched", ""),
                seconds("BM_NotPrefetched", "")};
    if (round.read > 0 && round.compute > 0 && round.prefetched > 0) rounds.push_back(round);
  }
  if (rounds.empty()) return {};
  std::sort(rounds.begin(), rounds.end(), [](const Round& a, const Round& b) {
    return a.prefetched / (a.read + a.compute) < b.prefetched / (b.read + b.compute);
  });
  return rounds[rounds.size() / 2];
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  zero::Goals goals(&argc, argv);
  benchmark::Initialize(&argc, argv);
  const absl::StatusOr<int> passes = zero::CalibratePasses();
  if (!passes.ok()) {
    std::fprintf(stderr, "pager_nvme_bench: %s\n", passes.status().ToString().c_str());
    return 1;
  }
  zero::RatioReporter reporter;
  zero::RegisterRounds(*passes);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const zero::Round r = zero::MedianRound(reporter);
  if (r.read > 0) {
    const double serial = r.read + r.compute, full = std::max(r.read, r.compute);
    const double hidden = (serial - r.prefetched) / std::min(r.read, r.compute);
    std::printf(
        "\npager step over the NVMe tier, %d tensors of %s, compute %d passes each; median of "
        "%d rounds: read %.1f ms, compute %.1f ms (limits, same round)\n"
        "  with Prefetch(%d) / (read + compute): %.2f (full overlap: %.2f); the read-ahead hid "
        "%.0f%% of the shorter limit (goal >= 50%%)\n"
        "  without Prefetch / (read + compute): %.2f\n",
        zero::kTensors, zero::FormatBytes(zero::kTensorBytes).c_str(), *passes,
        zero::kRounds, r.read * 1e3, r.compute * 1e3, zero::kLookahead, r.prefetched / serial,
        full / serial, hidden * 100, r.not_prefetched / serial);
    goals.Check(hidden >= 0.5, "the pager's read-ahead hides >= 50% of the shorter limit");
  }
  return goals.ExitCode(&reporter);
}
