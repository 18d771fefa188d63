// Stage 3's host cost per module: one planned training step (forward
// Fetch/Release per module, backward Fetch/AddGrad/Release, Step) of rank 0
// of a 64-rank job on a meta device (no bytes move, so what is timed is the
// engine's bookkeeping), with 10k, 100k and 1M modules of 16 parameters.
// Two shapes: the modules' units persistent (the default threshold: each
// 16-element module stays gathered, as in a mixture of experts' small
// pieces) and gathered on demand (threshold 0: every Fetch goes through the
// prefetch plan, its window and its claims). Prints the time per module and
// max/min of it over the sizes per shape: linear cost keeps it near 1; the
// goal is <= 2, and the exit status is 1 when it is missed (unless
// --report_only).
//   bazel run -c opt //bench:stage3_bench [-- --report_only]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "bench/ratio_reporter.h"
#include "bench/simulated_devices.h"
#include "benchmark/benchmark.h"
#include "memory/device_system.h"
#include "optimizers/sgd.h"
#include "zero/comm/meta_communicator.h"
#include "zero/engine.h"

namespace zero {
namespace {

constexpr int kRanks = 64;
constexpr size_t kModuleNumel = 16;
constexpr int64_t kSizes[] = {10'000, 100'000, 1'000'000};

struct Setup {
  std::unique_ptr<DeviceSystem> devices;
  std::unique_ptr<MetaCommunicator> comm;
  std::unique_ptr<Optimizer> sgd;
  std::unique_ptr<Engine> engine;
};

absl::StatusOr<Setup> MakeSetup(int modules, bool persistent) {
  Setup s;
  ASSIGN_OR_RETURN(s.devices, DeviceSystem::Create(SimulatedDevices(DeviceSpec::Kind::kMeta, 1,
                                                                    size_t{1} << 50)));
  ASSIGN_OR_RETURN(s.comm, MetaCommunicator::Create(0, kRanks));
  ASSIGN_OR_RETURN(s.sgd, MakeSgd({.momentum = 0.9}));
  std::vector<ParamSpec> specs;
  specs.reserve(modules);
  for (int m = 0; m < modules; ++m) specs.push_back({"m" + std::to_string(m), kModuleNumel, m});
  EngineConfig config;
  config.stage = 3;
  config.persistence_threshold = persistent ? 100'000 : 0;
  ASSIGN_OR_RETURN(s.engine, Engine::Create(config, std::move(specs), s.sgd.get(), s.comm.get(),
                                            s.devices.get(), 0));
  return s;
}

absl::Status Step(Engine& e, int modules) {
  for (int m = 0; m < modules; ++m) {
    RETURN_IF_ERROR(e.Fetch(m));
    RETURN_IF_ERROR(e.Release(m));
  }
  for (int m = modules; m-- > 0;) {
    RETURN_IF_ERROR(e.Fetch(m));
    RETURN_IF_ERROR(e.AddGrad(m, nullptr, kModuleNumel));
    RETURN_IF_ERROR(e.Release(m));
  }
  return e.Step();
}

// range(0): modules; range(1): 1 persistent units, 0 on demand.
void BM_Stage3Step(benchmark::State& state) {
  const int modules = static_cast<int>(state.range(0));
  absl::StatusOr<Setup> setup = MakeSetup(modules, state.range(1) != 0);
  absl::Status status = setup.ok() ? Step(*setup->engine, modules) : setup.status();
  if (!status.ok()) {  // the first step records the order; later ones follow it
    state.SkipWithError(std::string(status.message()).c_str());
    return;
  }
  for (auto _ : state) {
    if (status = Step(*setup->engine, modules); !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
}

// Steps timed per size: enough for a stable figure without minutes at 1M.
int64_t Iterations(int64_t modules) { return std::max<int64_t>(1, 200'000 / modules); }

std::string RunName(int64_t modules, int persistent) {
  return "BM_Stage3Step/" + std::to_string(modules) + "/" + (persistent ? "persistent" : "on_demand");
}

// Remembers CPU seconds per iteration: the machines this runs on are
// shared, and the engine's bookkeeping is all on this thread.
class CpuReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && run.iterations > 0) {
        seconds_[run.benchmark_name()] = run.cpu_accumulated_time / run.iterations;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  double seconds(const std::string& prefix) const {
    for (const auto& [name, s] : seconds_) {
      if (name.rfind(prefix + "/", 0) == 0 || name == prefix) return s;
    }
    return 0;
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  zero::Goals goals(&argc, argv);
  for (int persistent : {1, 0}) {
    for (int64_t n : zero::kSizes) {
      benchmark::RegisterBenchmark(zero::RunName(n, persistent).c_str(), zero::BM_Stage3Step)
          ->Args({n, persistent})
          ->Iterations(zero::Iterations(n))
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  zero::CpuReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nstage-3 step CPU time per module (64 ranks, meta device, 16 parameters each):\n");
  for (int persistent : {1, 0}) {
    const char* shape = persistent ? "persistent" : "on demand";
    double lo = 0, hi = 0;
    for (int64_t n : zero::kSizes) {
      const double per_module = reporter.seconds(zero::RunName(n, persistent)) / n;
      if (per_module <= 0) continue;  // filtered out
      std::printf("  %-10s %8lld modules: %6.0f ns per module\n", shape,
                  static_cast<long long>(n), per_module * 1e9);
      lo = lo == 0 ? per_module : std::min(lo, per_module);
      hi = std::max(hi, per_module);
    }
    if (lo > 0) {
      std::printf("  %s: max/min per module = %.2f (goal <= 2)\n", shape, hi / lo);
      goals.Check(hi / lo <= 2.0, std::string(shape) +
                                      ": stage-3 cost per module is not linear in module count");
    }
  }
  return goals.ExitCode();
}
