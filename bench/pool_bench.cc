// Pool benchmarks, each reported as a ratio to a limit measured in the same run:
//  - a cached allocate+free pair against glibc malloc+free, 512 B to 64 MiB;
//  - replay of a transformer training trace: peak reserved / peak allocated
//    (goal: at most 1.10).
//   bazel run -c opt //bench:pool_bench
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench/ratio_reporter.h"
#include "bench/trace.h"
#include "benchmark/benchmark.h"
#include "memory/device_system.h"
#include "memory/units.h"

namespace zero {
namespace {

DeviceSystem& System() {
  static DeviceSystem* system =
      DeviceSystem::Create({DeviceSpec::Kind::kHost, 1, 4 * kGiB}).value().release();
  return *system;
}

void BM_PoolPair(benchmark::State& state) {
  const size_t bytes = state.range(0);
  DevicePool& pool = System().pool(0);
  // Warm the cache so the loop measures reuse, not mapping.
  void* warm = pool.Allocate(bytes).value();
  (void)pool.Deallocate(warm, bytes);
  for (auto _ : state) {
    void* p = pool.Allocate(bytes, Tag::kActivations).value();
    benchmark::DoNotOptimize(p);
    (void)pool.Deallocate(p, bytes);
  }
}

void BM_MallocPair(benchmark::State& state) {
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}

BENCHMARK(BM_PoolPair)->RangeMultiplier(8)->Range(512, 64 << 20);
BENCHMARK(BM_MallocPair)->RangeMultiplier(8)->Range(512, 64 << 20);

void PrintRatios(const RatioReporter& reporter) {
  std::printf("\nallocate+free pair, pool time / malloc time (lower is better):\n");
  for (size_t bytes = 512; bytes <= (size_t{64} << 20); bytes *= 8) {
    const std::string arg = "/" + std::to_string(bytes);
    const double pool = reporter.seconds("BM_PoolPair" + arg);
    const double glibc = reporter.seconds("BM_MallocPair" + arg);
    if (pool > 0 && glibc > 0) {
      std::printf("  %10s  pool %8.1f ns  malloc %8.1f ns  ratio %.2f\n",
                  FormatBytes(bytes).c_str(), pool * 1e9, glibc * 1e9, pool / glibc);
    }
  }
}

void PrintTraceRatio() {
  TransformerShape shape;  // GPT-2 small, batch 4 x 512 tokens, fp32
  auto system = DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, 80 * kGiB});
  auto result = Replay(TransformerTrace(shape), (*system)->pool(0));
  if (!result.ok()) {
    std::printf("trace replay failed: %s\n", std::string(result.status().message()).c_str());
    return;
  }
  std::printf("\ntransformer trace (%zu ops): peak reserved %s / peak allocated %s = %.3f "
              "(goal <= 1.10)\n",
              result->ops, FormatBytes(result->peak_reserved).c_str(),
              FormatBytes(result->peak_allocated).c_str(),
              double(result->peak_reserved) / double(result->peak_allocated));
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  zero::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  zero::PrintRatios(reporter);
  zero::PrintTraceRatio();
  return 0;
}
