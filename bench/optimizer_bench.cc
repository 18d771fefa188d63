// The CPU AdamW against two ceilings, measured in the same run on the same
// arrays, each with AdamW's exact memory traffic (read p, g, m, v; write p,
// m, v and the optional copy) and trivial arithmetic (m += g; v += g;
// p += g) (touch_limit.h):
//  - the "limit" runs through the same SIMD loop and thread pool as AdamW,
//    so only the arithmetic differs. AdamW is memory-bound, so the goal is
//    limit_time / adamw_time >= 0.95 (the program exits 1 when a row misses
//    it, unless --report_only);
//  - the "ceiling" is a plain loop compiled on its own and vectorized by the
//    compiler, on threads of its own: a yardstick outside the code under
//    test, in case that loop or pool is slow for AdamW and limit alike.
//
// Each AdamW benchmark rotates limit, ceiling and AdamW passes, so all see
// the same machine: on a shared host, bandwidth drifts between runs more than
// the difference being measured. Ratios come from the best pass of each (as
// STREAM reports), from the means, and from CPU time (which leaves out time
// the OS gave to other processes). AdamW runs in two phases: "early"
// steps (from 1) and "steady" ones (from 10^6), where sqrt(1 - beta2^step)
// has rounded to 1 and the kernel skips that division (same bits; see
// adam_rule.h). The scalar level on one thread gives the speed-up baseline.
// Build with -c opt.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/pass_timer.h"
#include "bench/ratio_reporter.h"
#include "bench/touch_limit.h"
#include "benchmark/benchmark.h"
#include "compute/cpu/isa.h"
#include "compute/parallel.h"
#include "optimizers/adam.h"

namespace zero {
namespace {

constexpr int64_t kSizes[] = {int64_t{16} << 20, int64_t{64} << 20};
constexpr int64_t kBytesPerElement = 28;  // fp32: 16 read + 12 written; bf16 variant: 14 + 14

enum Variant : int64_t { kF32Grads = 0, kBF16GradsAndCopy = 1 };
const char* VariantName(int64_t v) { return v == kF32Grads ? "f32" : "bf16+copy"; }

constexpr int64_t kFirstStep[] = {1, 1000000};  // by phase: early, steady
const char* PhaseName(int64_t phase) { return phase == 0 ? "early" : "steady"; }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer Allocate(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
}

// The arrays of one size, filled once (in parallel, so pages spread like the
// work does). Gradients are non-negative so the limit loop's v += g keeps v
// valid for AdamW, and nothing becomes subnormal (that would time the CPU's
// slow path, not the optimizer).
class Arrays {
 public:
  explicit Arrays(size_t n) : n_(n) {
    for (Buffer* b : {&p_, &g_, &m_, &v_}) *b = Allocate(n * 4);
    g16_ = Allocate(n * 2);
    copy16_ = Allocate(n * 2);
    ParallelFor(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float x = static_cast<float>((i * 2654435761u) % 1000003) / 1000003.0f;
        f32(p_)[i] = 0.5f + x;
        f32(g_)[i] = 0.01f * x;
        f32(m_)[i] = 0.0f;
        f32(v_)[i] = 0.0f;
        reinterpret_cast<bf16*>(g16_.get())[i] = FloatToBF16(0.01f * x);
      }
    });
  }

  StepArgs Args(int64_t variant, int64_t step) {
    state_ = {std::span<float>(f32(m_), n_), std::span<float>(f32(v_), n_)};
    StepArgs args;
    args.params = std::span<float>(f32(p_), n_);
    args.state = state_;
    args.step = step;
    if (variant == kF32Grads) {
      args.grads = g_.get();
    } else {
      args.grads = g16_.get();
      args.grad_dtype = DType::kBF16;
      args.param_copy = copy16_.get();
      args.copy_dtype = DType::kBF16;
    }
    return args;
  }

  bench::PlainArrays Plain(int64_t variant) {
    bench::PlainArrays a{.p = f32(p_), .m = f32(m_), .v = f32(v_), .n = n_};
    if (variant == kF32Grads) {
      a.f32_grads = f32(g_);
    } else {
      a.bf16_grads = reinterpret_cast<const uint16_t*>(g16_.get());
      a.copy = reinterpret_cast<uint16_t*>(copy16_.get());
    }
    return a;
  }

 private:
  static float* f32(const Buffer& b) { return reinterpret_cast<float*>(b.get()); }

  size_t n_;
  Buffer p_, g_, m_, v_, g16_, copy16_;
  std::vector<std::span<float>> state_;
};

Arrays& ArraysFor(int64_t n) {
  static auto* arrays = new std::map<int64_t, std::unique_ptr<Arrays>>;
  std::unique_ptr<Arrays>& a = (*arrays)[n];
  if (a == nullptr) a = std::make_unique<Arrays>(static_cast<size_t>(n));
  return *a;
}

std::unique_ptr<Optimizer> NewAdamW() {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = MakeAdamW();
  if (!opt.ok()) std::abort();  // the default config cannot fail
  return std::move(opt).value();
}

using bench::Measure;
using bench::Pass;
using bench::Times;

// Results for the summary, by (n, threads, variant, phase).
struct Result {
  Times limit, ceiling, adamw;
};
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;
std::map<Key, Result>& Results() {
  static auto* results = new std::map<Key, Result>;
  return *results;
}

Key KeyOf(const benchmark::State& state) {
  return {state.range(0), state.range(1), state.range(2), state.range(3)};
}

void Report(benchmark::State& state, const Result& r) {
  const double gb = static_cast<double>(state.range(0) * kBytesPerElement) / 1e9;
  state.counters["adamw_GB/s"] = gb / r.adamw.best;
  if (r.limit.total > 0) {
    state.counters["limit_GB/s"] = gb / r.limit.best;
    state.counters["limit/adamw"] = r.limit.best / r.adamw.best;
    state.counters["mean_limit/adamw"] = r.limit.total / r.adamw.total;
    state.counters["cpu_limit/adamw"] = r.limit.cpu_total / r.adamw.cpu_total;
    state.counters["ceiling/adamw"] = r.ceiling.best / r.adamw.best;
  }
}

// Args {elements, threads, variant, phase}. Reported time: the AdamW passes.
void BM_AdamW(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  SetNumThreads(threads);
  Arrays& a = ArraysFor(state.range(0));
  std::unique_ptr<Optimizer> opt = NewAdamW();
  const int64_t variant = state.range(2);
  int64_t step = kFirstStep[state.range(3)];
  Result& r = Results()[KeyOf(state)];
  absl::Status status;
  const auto pass = [&](int which) {
    return Measure([&] {
      if (which == 0) bench::RunTouchLimit(a.Args(variant, 1));
      if (which == 1) bench::RunPlainCeiling(a.Plain(variant), threads);
      if (which == 2) status = opt->Step(a.Args(variant, step++));
    });
  };
  int first = 0;  // rotates, so no pass always runs first
  for (auto _ : state) {
    Pass passes[3];
    for (int k = 0; k < 3; ++k) passes[(first + k) % 3] = pass((first + k) % 3);
    first = (first + 1) % 3;
    if (!status.ok()) {
      state.SkipWithError(("AdamW step: " + status.ToString()).c_str());
      return;
    }
    r.limit.Add(passes[0]);
    r.ceiling.Add(passes[1]);
    r.adamw.Add(passes[2]);
    state.SetIterationTime(passes[2].wall);
  }
  Report(state, r);
}

// The same AdamW at the scalar level on one thread: the speed-up baseline.
void BM_ScalarAdamW(benchmark::State& state) {
  SetNumThreads(1);
  if (!cpu::SetCpuIsa(cpu::CpuIsa::kScalar).ok()) state.SkipWithError("no scalar level");
  Arrays& a = ArraysFor(state.range(0));
  std::unique_ptr<Optimizer> opt = NewAdamW();
  int64_t step = kFirstStep[state.range(3)];
  Result& r = Results()[KeyOf(state)];
  absl::Status status;
  for (auto _ : state) {
    const Pass pass = Measure([&] { status = opt->Step(a.Args(state.range(2), step++)); });
    if (!status.ok()) {
      state.SkipWithError(("scalar AdamW step: " + status.ToString()).c_str());
      break;
    }
    r.adamw.Add(pass);
    state.SetIterationTime(pass.wall);
  }
  // Back to the best level for the next benchmark; the scalar run cannot
  // have changed what this CPU supports.
  (void)cpu::SetCpuIsa(cpu::BestCpuIsa());
  if (status.ok()) Report(state, r);
}

std::vector<int64_t> ThreadCounts() {
  const int64_t all = AvailableCpus();
  return all > 1 ? std::vector<int64_t>{1, all} : std::vector<int64_t>{1};
}

constexpr int64_t kScalarMark = -1;  // the threads slot of scalar results

void RegisterAll() {
  for (int64_t n : kSizes) {
    for (int64_t variant : {kF32Grads, kBF16GradsAndCopy}) {
      for (int64_t phase : {0, 1}) {
        for (int64_t threads : ThreadCounts()) {
          benchmark::RegisterBenchmark("BM_AdamW", &BM_AdamW)
              ->Args({n, threads, variant, phase})
              ->UseManualTime()
              ->MinTime(1.5)
              ->Unit(benchmark::kMillisecond);
        }
        benchmark::RegisterBenchmark("BM_ScalarAdamW", &BM_ScalarAdamW)
            ->Args({n, kScalarMark, variant, phase})
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

// One row per (size, grads, threads, phase); the goal is checked per row.
void PrintSummary(const RatioReporter&, Goals& goals) {
  std::printf("\n== optimizer_bench: AdamW vs its memory-bound limit and an independent ceiling "
              "(SIMD %s, %d cpus) ==\n",
              std::string(cpu::Name(cpu::BestCpuIsa())).c_str(), AvailableCpus());
  std::printf("%-4s %-9s %-7s %-6s %10s %10s %10s %11s %10s %10s %13s %11s %8s\n", "n", "grads",
              "threads", "phase", "ceil_GB/s", "limit_GB/s", "adamw_GB/s", "limit/adamw",
              "(of means)", "(cpu time)", "ceiling/adamw", "scalar_GB/s", "speedup");
  int met = 0, rows = 0;
  for (const auto& [key, r] : Results()) {
    const auto [n, threads, variant, phase] = key;
    if (threads == kScalarMark || r.limit.total == 0) continue;
    const auto scalar = Results().find({n, kScalarMark, variant, phase});
    const double scalar_best = scalar == Results().end() ? 0.0 : scalar->second.adamw.best;
    const double gb = static_cast<double>(n * kBytesPerElement) / 1e9;
    const double ratio = r.limit.best / r.adamw.best;
    ++rows;
    met += ratio >= 0.95;
    std::printf("%-4s %-9s %-7lld %-6s %10.2f %10.2f %10.2f %11.3f %10.3f %10.3f %13.3f %11.2f "
                "%7.2fx\n",
                (std::to_string(n >> 20) + "M").c_str(), VariantName(variant),
                static_cast<long long>(threads), PhaseName(phase), gb / r.ceiling.best,
                gb / r.limit.best, gb / r.adamw.best, ratio, r.limit.total / r.adamw.total,
                r.limit.cpu_total / r.adamw.cpu_total, r.ceiling.best / r.adamw.best,
                scalar_best > 0 ? gb / scalar_best : 0.0,
                scalar_best > 0 ? scalar_best / r.adamw.best : 0.0);
  }
  std::printf("ceiling/adamw: the plain loop's best time / AdamW's (1.00 = AdamW as fast as a "
              "compiler-vectorized loop with the same bytes)\n");
  std::printf("goal limit/adamw >= 0.95 (best passes): met in %d of %d rows\n", met, rows);
  goals.Check(met == rows, absl::StrFormat("limit/adamw >= 0.95: missed in %d of %d rows",
                                           rows - met, rows));
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  return zero::RunWithGoals(argc, argv, zero::RegisterAll, zero::PrintSummary);
}
