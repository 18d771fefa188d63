// Pool benchmarks, each reported as a ratio to a limit measured in the same run
// (CPU time per pair, the median over --benchmark_repetitions):
//  - a cached allocate+free pair against glibc malloc+free, 512 B to 64 MiB
//    (goal: the pool's pair at most 150 ns, CPU time);
//  - replay of a transformer training trace: peak reserved / peak allocated
//    (goal: at most 1.10; allocated counts blocks, requests rounded up to
//    512 B), and peak reserved / peak requested (what the trace asked for,
//    so the rounding counts as waste too).
// Exits 1 when the goal is missed (unless --report_only) or a run fails.
//   bazel run -c opt //bench:pool_bench -- --benchmark_repetitions=5
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "base/units.h"
#include "bench/ratio_reporter.h"
#include "bench/simulated_devices.h"
#include "bench/trace.h"
#include "benchmark/benchmark.h"
#include "memory/device_system.h"

namespace zero {
namespace {

DeviceSystem& System() {
  static DeviceSystem* system =
      DeviceSystem::Create(SimulatedDevices(DeviceSpec::Kind::kHost, 1, 4 * kGiB))
          .value()
          .release();
  return *system;
}

void BM_PoolPair(benchmark::State& state) {
  const size_t bytes = state.range(0);
  DevicePool& pool = System().pool(0);
  // Warm the cache so the loop measures reuse, not mapping.
  absl::StatusOr<void*> warm = pool.Allocate(bytes);
  absl::Status status = warm.status();
  if (warm.ok()) status = pool.Deallocate(*warm, bytes);
  for (auto _ : state) {
    if (!status.ok()) return state.SkipWithError(status.ToString().c_str());
    absl::StatusOr<void*> p = pool.Allocate(bytes, Tag::kActivations);
    if (!p.ok()) return state.SkipWithError(p.status().ToString().c_str());
    benchmark::DoNotOptimize(*p);
    status = pool.Deallocate(*p, bytes);
  }
  if (!status.ok()) state.SkipWithError(status.ToString().c_str());
}

void BM_MallocPair(benchmark::State& state) {
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

constexpr int64_t kPairSizes[] = {512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20};

void PairSizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : kPairSizes) b->Arg(bytes);
}

BENCHMARK(BM_PoolPair)->Apply(PairSizes);
BENCHMARK(BM_MallocPair)->Apply(PairSizes);

// Issue 42's goal for a cached pair (the front cache's same-stream reuse),
// with the ratio to glibc's pair of the same size printed beside it.
constexpr double kPairGoalNs = 150;

void PrintRatios(const RatioReporter& reporter, Goals& goals) {
  std::printf("\nallocate+free pair, pool time / malloc time (lower is better; goal: pool <= %.0f ns):\n",
              kPairGoalNs);
  for (int64_t bytes : kPairSizes) {
    const std::string arg = "/" + std::to_string(bytes);
    const double pool = reporter.cpu_median("BM_PoolPair" + arg);
    const double glibc = reporter.cpu_median("BM_MallocPair" + arg);
    if (pool > 0 && glibc > 0) {
      std::printf("  %10s  pool %8.1f ns  malloc %8.1f ns  ratio %.2f\n",
                  FormatBytes(bytes).c_str(), pool * 1e9, glibc * 1e9, pool / glibc);
      goals.Check(pool * 1e9 <= kPairGoalNs,
                  absl::StrFormat("pool pair at %s: %.1f ns > %.0f ns", FormatBytes(bytes),
                                  pool * 1e9, kPairGoalNs));
    }
  }
}

constexpr double kFragmentationGoal = 1.10;

void PrintTraceRatio(Goals& goals) {
  auto system = DeviceSystem::Create(SimulatedDevices(DeviceSpec::Kind::kMeta, 1, 80 * kGiB));
  if (!system.ok()) return goals.Error("meta device: " + system.status().ToString());
  // GPT-2 small, batch 4 x 512 tokens, fp32
  auto result = Replay(TransformerTrace(TraceShape()), (*system)->pool(0));
  if (!result.ok()) return goals.Error("trace replay: " + result.status().ToString());
  const double per_allocated = double(result->peak_reserved) / double(result->peak_allocated);
  const double per_requested = double(result->peak_reserved) / double(result->peak_requested);
  std::printf("\ntransformer trace (%zu ops), peak reserved %s:\n", result->ops,
              FormatBytes(result->peak_reserved).c_str());
  std::printf("  / peak allocated %s (blocks, 512-rounded) = %.4f (goal <= %.2f)\n",
              FormatBytes(result->peak_allocated).c_str(), per_allocated, kFragmentationGoal);
  std::printf("  / peak requested %s (what the trace asked) = %.4f\n",
              FormatBytes(result->peak_requested).c_str(), per_requested);
  goals.Check(per_allocated <= kFragmentationGoal,
              absl::StrFormat("trace peak reserved / peak allocated %.4f > %.2f", per_allocated,
                              kFragmentationGoal));
}

void PrintSummary(const RatioReporter& reporter, Goals& goals) {
  PrintRatios(reporter, goals);
  PrintTraceRatio(goals);
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) { return zero::RunWithGoals(argc, argv, zero::PrintSummary); }
