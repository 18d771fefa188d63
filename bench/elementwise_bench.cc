// The element-wise operations on host devices (optimizers/
// elementwise_executor.h: a host stream, the active SIMD level, the CPU
// pool) against two ceilings measured in the same run:
//  - touch: a plain loop with the same bytes read and written per element
//    (bench/touch_ceiling.h: compiled on its own, vectorized by the
//    compiler), on as many std::threads as the pool has;
//  - memcpy: the bandwidth of copying an fp32 array, split the same way.
// Each benchmark iteration rotates a memcpy, a touch and an operation pass
// (bench/pass_timer.h); ratios come from the best pass of each, from the
// means, and from CPU time (which leaves out time the OS gave to other
// processes). Widen, narrow and accumulate are memory-bound: the goal is
// touch CPU time / operation CPU time >= 0.8 for each (the program exits 1
// when one misses it, unless --report_only). CPU time, not the best wall
// pass: on the 2-core build machines, shared with other builds, best-pass
// ratios swing by +-30% between runs while CPU-time ratios stay within a
// few percent. The sum of squares adds in element order on one thread (the
// order of the loops it replaced, cpu/run_elementwise.h); its row says what
// that costs, with no goal.
//   bazel run -c opt //bench:elementwise_bench
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "bench/pass_timer.h"
#include "bench/ratio_reporter.h"
#include "bench/touch_ceiling.h"
#include "benchmark/benchmark.h"
#include "compute/cpu/isa.h"
#include "compute/elementwise_executor.h"
#include "compute/parallel.h"
#include "memory/host_stream.h"

namespace zero {
namespace {

constexpr size_t kN = size_t{16} << 20;  // elements: 64 MiB of fp32, past every cache

struct Row {
  ElementwiseKind kind;
  DType dtype;
  int bytes;  // per element, read + written
};
constexpr Row kRows[] = {
    {ElementwiseKind::kWiden, DType::kBF16, 6},      {ElementwiseKind::kWiden, DType::kF16, 6},
    {ElementwiseKind::kNarrow, DType::kBF16, 6},     {ElementwiseKind::kNarrow, DType::kF16, 6},
    {ElementwiseKind::kAccumulate, DType::kBF16, 8}, {ElementwiseKind::kAccumulate, DType::kF16, 8},
    {ElementwiseKind::kSumOfSquares, DType::kBF16, 2},
};
constexpr int kRowCount = sizeof(kRows) / sizeof(kRows[0]);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// fp32 and 2-byte arrays of kN elements (finite, so no slow paths), shared
// by every benchmark; filled on the pool so pages spread as the work does.
struct Arrays {
  std::unique_ptr<uint32_t[], FreeDeleter> wide, wide2;
  std::unique_ptr<uint16_t[], FreeDeleter> narrow;
  double sum = 0;
};

Arrays& Get() {
  static Arrays* a = [] {
    auto* arrays = new Arrays;
    arrays->wide.reset(static_cast<uint32_t*>(std::aligned_alloc(4096, kN * 4)));
    arrays->wide2.reset(static_cast<uint32_t*>(std::aligned_alloc(4096, kN * 4)));
    arrays->narrow.reset(static_cast<uint16_t*>(std::aligned_alloc(4096, kN * 2)));
    ParallelFor(kN, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float x = 0.5f + static_cast<float>(i % 1021) / 1021.0f;
        std::memcpy(&arrays->wide[i], &x, 4);
        arrays->wide2[i] = arrays->wide[i];
        arrays->narrow[i] = FloatToBF16(x).bits;  // finite in fp16 too
      }
    });
    return arrays;
  }();
  return *a;
}

HostStream& Stream0() {
  static HostStream* stream = new HostStream(0);
  return *stream;
}

absl::Status RunOnStream(const Row& row) {
  Arrays& a = Get();
  const ElementwiseExecutor& ex = ElementwiseExecutor::For(DeviceKind::kHost);
  HostStream& s = Stream0();
  float* wide = reinterpret_cast<float*>(a.wide.get());
  absl::Status status;
  switch (row.kind) {
    case ElementwiseKind::kWiden:
      status = ex.Widen(wide, a.narrow.get(), kN, row.dtype, &s);
      break;
    case ElementwiseKind::kNarrow:
      status = ex.Narrow(a.narrow.get(), wide, kN, row.dtype, &s);
      break;
    case ElementwiseKind::kAccumulate:
      // Grows by about 1 a run: finite (even in fp16) for far more runs than made.
      status = ex.AccumulateNarrow(a.narrow.get(), wide, kN, row.dtype, &s);
      break;
    default: status = ex.SumOfSquares(&a.sum, a.narrow.get(), kN, row.dtype, &s); break;
  }
  return status.ok() ? s.Synchronize() : status;
}

void RunTouch(const Row& row) {
  Arrays& a = Get();
  static uint64_t sink = 0;
  bench::SplitOverThreads(kN, NumThreads(), [&](size_t begin, size_t end) {
    switch (row.kind) {
      case ElementwiseKind::kWiden:
        bench::TouchWiden(a.wide.get(), a.narrow.get(), begin, end);
        break;
      case ElementwiseKind::kNarrow:
        bench::TouchNarrow(a.narrow.get(), a.wide.get(), begin, end);
        break;
      case ElementwiseKind::kAccumulate:
        bench::TouchAccumulate(a.narrow.get(), a.wide.get(), begin, end);
        break;
      default: benchmark::DoNotOptimize(sink += bench::TouchRead(a.narrow.get(), begin, end));
    }
  });
}

std::string RowName(const Row& row) {
  return absl::StrFormat("%s/%s", Name(row.kind), std::string(Name(row.dtype)));
}

void RunMemcpy() {
  Arrays& a = Get();
  bench::SplitOverThreads(kN, NumThreads(), [&](size_t begin, size_t end) {
    std::memcpy(&a.wide2[begin], &a.wide[begin], (end - begin) * 4);
  });
  benchmark::ClobberMemory();
}

// Passes of each row, for the summary.
struct Result {
  bench::Times memcpy, touch, op;
};
std::map<int, Result>& Results() {
  static auto* results = new std::map<int, Result>;
  return *results;
}

// Arg: the row. Reported time: the operation's passes.
void BM_Elementwise(benchmark::State& state) {
  const int r = static_cast<int>(state.range(0));
  const Row& row = kRows[r];
  state.SetLabel(RowName(row));
  Result& result = Results()[r];
  absl::Status status;
  const auto pass = [&](int which) {
    return bench::Measure([&] {
      if (which == 0) RunMemcpy();
      if (which == 1) RunTouch(row);
      if (which == 2) status = RunOnStream(row);
    });
  };
  int first = 0;  // rotates, so no pass always runs first
  for (auto _ : state) {
    bench::Pass passes[3];
    for (int k = 0; k < 3; ++k) passes[(first + k) % 3] = pass((first + k) % 3);
    first = (first + 1) % 3;
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
    result.memcpy.Add(passes[0]);
    result.touch.Add(passes[1]);
    result.op.Add(passes[2]);
    state.SetIterationTime(passes[2].wall);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kN) * row.bytes);
}

void RegisterAll() {
  for (int r = 0; r < kRowCount; ++r) {
    benchmark::RegisterBenchmark("BM_Elementwise", &BM_Elementwise)
        ->Arg(r)
        ->UseManualTime()
        ->MinTime(1.0)
        ->Unit(benchmark::kMillisecond);
  }
}

void PrintSummary(const RatioReporter&, Goals& goals) {
  std::printf("\n== elementwise_bench: %zu M elements, SIMD %s, %d threads ==\n",
              kN >> 20, std::string(cpu::Name(cpu::ActiveCpuIsa())).c_str(), NumThreads());
  std::printf("%-22s %8s %10s %11s %9s %10s %10s %10s\n", "operation", "GB/s", "touch_GB/s",
              "memcpy_GB/s", "touch/op", "(of means)", "(cpu time)", "op/memcpy");
  int missed = 0;
  for (const auto& [r, res] : Results()) {
    const Row& row = kRows[r];
    const double gb = static_cast<double>(kN) * row.bytes / 1e9;
    const double memcpy_gbs = static_cast<double>(kN) * 8 / 1e9 / res.memcpy.best;
    const double ratio = res.touch.best / res.op.best;
    const double cpu_ratio = res.touch.cpu_total / res.op.cpu_total;
    const bool goal = row.kind != ElementwiseKind::kSumOfSquares;
    std::printf("%-22s %8.2f %10.2f %11.2f %9.3f %10.3f %10.3f %10.3f%s\n",
                RowName(row).c_str(), gb / res.op.best, gb / res.touch.best, memcpy_gbs, ratio,
                res.touch.total / res.op.total, cpu_ratio,
                gb / res.op.best / memcpy_gbs, goal ? "" : "  (no goal)");
    if (goal && cpu_ratio < 0.8) ++missed;
  }
  std::printf("touch/op: the plain loop's time / the operation's (1.00 = as fast as a "
              "compiler-vectorized loop with the same bytes); goal: cpu time >= 0.8\n");
  goals.Check(missed == 0,
              absl::StrFormat("touch/op (cpu time) >= 0.8: missed in %d rows", missed));
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  return zero::RunWithGoals(argc, argv, zero::RegisterAll, zero::PrintSummary);
}
