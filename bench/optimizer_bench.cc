// The CPU AdamW against its ceiling, measured in the same run on the same
// arrays: a "limit" loop with AdamW's exact memory traffic (read p, g, m, v;
// write p, m, v and the optional copy) and trivial arithmetic, run through the
// same SIMD loop and thread pool. AdamW is memory-bound, so the goal is
// limit_time / adamw_time >= 0.95. Also reports the speed-up over the scalar
// level on one thread. Build with -c opt.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "bench/ratio_reporter.h"
#include "optimizers/adam.h"
#include "optimizers/cpu/isa.h"
#include "optimizers/cpu/run.h"
#include "optimizers/parallel.h"

namespace zero {
namespace {

constexpr int64_t kSizes[] = {int64_t{16} << 20, int64_t{64} << 20};
constexpr int64_t kBytesPerElement = 28;  // fp32: 16 read + 12 written; bf16 variant: 14 + 14

enum Variant : int64_t { kF32Grads = 0, kBF16GradsAndCopy = 1 };

const char* VariantName(int64_t v) { return v == kF32Grads ? "f32" : "bf16+copy"; }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer Allocate(size_t bytes) {
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
}

// The arrays of one size, filled once (in parallel, so pages spread like the
// work does). Values stay well inside the normal range: subnormals would
// measure the CPU's slow path, not the optimizer.
class Arrays {
 public:
  explicit Arrays(size_t n) : n_(n) {
    for (Buffer* b : {&p_, &g_, &m_, &v_}) *b = Allocate(n * 4);
    g16_ = Allocate(n * 2);
    copy16_ = Allocate(n * 2);
    ParallelFor(n, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const float x = static_cast<float>((i * 2654435761u) % 1000003) / 1000003.0f - 0.5f;
        f32(p_)[i] = 1.0f + x;
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
  if (!opt.ok()) std::abort();  // default config: cannot fail
  return std::move(opt).value();
}

// Args: {elements, threads, variant}.
void Setup(benchmark::State& state, int threads, cpu::CpuIsa isa) {
  SetNumThreads(threads);
  if (!cpu::SetCpuIsa(isa).ok()) state.SkipWithError("SIMD level not supported");
  ArraysFor(state.range(0));  // allocate before timing
}

void Finish(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * state.range(0) * kBytesPerElement);
  state.counters["threads"] = NumThreads();
  (void)cpu::SetCpuIsa(cpu::BestCpuIsa());
}

void BM_Limit(benchmark::State& state) {
  Setup(state, static_cast<int>(state.range(1)), cpu::BestCpuIsa());
  Arrays& a = ArraysFor(state.range(0));
  for (auto _ : state) cpu::RunTouch(a.Args(state.range(2), 1));
  Finish(state);
}

void BM_AdamW(benchmark::State& state) {
  Setup(state, static_cast<int>(state.range(1)), cpu::BestCpuIsa());
  Arrays& a = ArraysFor(state.range(0));
  std::unique_ptr<Optimizer> opt = NewAdamW();
  int64_t step = 1;
  for (auto _ : state) {
    if (!opt->Step(a.Args(state.range(2), step++)).ok()) state.SkipWithError("Step failed");
  }
  Finish(state);
}

// The same AdamW at the scalar level on one thread: the speed-up baseline.
void BM_ScalarAdamW(benchmark::State& state) {
  Setup(state, 1, cpu::CpuIsa::kScalar);
  Arrays& a = ArraysFor(state.range(0));
  std::unique_ptr<Optimizer> opt = NewAdamW();
  int64_t step = 1;
  for (auto _ : state) {
    if (!opt->Step(a.Args(state.range(2), step++)).ok()) state.SkipWithError("Step failed");
  }
  Finish(state);
}

std::vector<int64_t> ThreadCounts() {
  const int64_t all = AvailableCpus();
  return all > 1 ? std::vector<int64_t>{1, all} : std::vector<int64_t>{1};
}

void RegisterAll() {
  for (int64_t n : kSizes) {
    for (int64_t variant : {kF32Grads, kBF16GradsAndCopy}) {
      for (int64_t threads : ThreadCounts()) {
        for (auto* fn : {&BM_Limit, &BM_AdamW}) {
          const char* name = fn == &BM_Limit ? "BM_Limit" : "BM_AdamW";
          benchmark::RegisterBenchmark(name, fn)
              ->Args({n, threads, variant})
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
      benchmark::RegisterBenchmark("BM_ScalarAdamW", &BM_ScalarAdamW)
          ->Args({n, 1, variant})
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

std::string RunName(const char* fn, int64_t n, int64_t threads, int64_t variant) {
  return std::string(fn) + "/" + std::to_string(n) + "/" + std::to_string(threads) + "/" +
         std::to_string(variant) + "/real_time";
}

void PrintSummary(const RatioReporter& r) {
  std::printf("\n== optimizer_bench: AdamW vs its memory-bound limit (SIMD %s, %d cpus) ==\n",
              std::string(cpu::Name(cpu::BestCpuIsa())).c_str(), AvailableCpus());
  std::printf("%-5s %-9s %-7s %11s %11s %12s %12s %9s\n", "n", "grads", "threads", "limit_GB/s",
              "adamw_GB/s", "limit/adamw", "scalar_GB/s", "speedup");
  int met = 0, rows = 0;
  for (int64_t n : kSizes) {
    for (int64_t variant : {kF32Grads, kBF16GradsAndCopy}) {
      const double scalar = r.seconds(RunName("BM_ScalarAdamW", n, 1, variant));
      for (int64_t threads : ThreadCounts()) {
        const double limit = r.seconds(RunName("BM_Limit", n, threads, variant));
        const double adamw = r.seconds(RunName("BM_AdamW", n, threads, variant));
        if (limit == 0 || adamw == 0) continue;
        const double gb = static_cast<double>(n * kBytesPerElement) / 1e9;
        const double ratio = limit / adamw;
        ++rows;
        met += ratio >= 0.95;
        std::printf("%-5s %-9s %-7lld %11.2f %11.2f %12.3f %12.2f %8.2fx\n",
                    (std::to_string(n >> 20) + "M").c_str(), VariantName(variant),
                    static_cast<long long>(threads), gb / limit, gb / adamw, ratio,
                    scalar > 0 ? gb / scalar : 0.0, scalar > 0 ? scalar / adamw : 0.0);
      }
    }
  }
  std::printf("goal limit/adamw >= 0.95: met in %d of %d rows\n", met, rows);
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  zero::RegisterAll();
  zero::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  zero::PrintSummary(reporter);
  return 0;
}
