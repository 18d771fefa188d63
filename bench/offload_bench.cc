// Pager bandwidth on host devices, as a fraction of memcpy bandwidth measured
// in the same run over the same kinds of buffers (a device-pool block and a
// pinned-host-pool block, both page-aligned, so both sides see the same
// alignment and 4K-aliasing behaviour):
//  - page-out: a dirty resident tensor copied to its home block on the
//    page-out stream, until that stream is done;
//  - page-in: the same back on the page-in stream.
// 1.0 would mean the pager's streams, events and books cost nothing.
// Exits 1 when a run fails.
//   bazel run -c opt //bench:offload_bench
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "base/units.h"
#include "bench/ratio_reporter.h"
#include "bench/simulated_devices.h"
#include "benchmark/benchmark.h"
#include "memory/device_system.h"
#include "offload/host_pool.h"
#include "offload/pager.h"

namespace zero {
namespace {

constexpr size_t kLargest = 256 * kMiB;

// One system, host pool and pager for the whole run: streams live as long as
// the system, so making a pager per benchmark call would pile them up.
struct Setup {
  std::unique_ptr<DeviceSystem> system;
  std::unique_ptr<PinnedHostPool> host;
  std::unique_ptr<Pager> pager;
};

Setup& Get() {
  static Setup* setup = [] {
    auto* s = new Setup;
    s->system =
        DeviceSystem::Create(SimulatedDevices(DeviceSpec::Kind::kHost, 1, 3 * kLargest)).value();
    s->host = PinnedHostPool::Create(s->system.get(), 3 * kLargest).value();
    PagerOptions options;  // by name: a brace list would leave the NVMe fields unnamed
    options.budget_bytes = kLargest;
    s->pager = Pager::Create(s->system.get(), 0, s->host.get(), options).value();
    return s;
  }();
  return *setup;
}

void Check(const absl::Status& status, benchmark::State& state) {
  if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
}

// A registered tensor with bytes in it, resident and clean; unregistered
// when the benchmark ends.
class Tensor {
 public:
  explicit Tensor(size_t bytes) : pager_(*Get().pager) {
    handle_ = pager_.Register(bytes, Tag::kOptimizerState, "bench").value();
    Write();
    // A first round trip maps and touches both blocks, so the timed loops
    // measure copies, not page faults.
    (void)pager_.PageOut(handle_);
    (void)pager_.PageIn(handle_);
    (void)pager_.Synchronize();
  }
  ~Tensor() { (void)pager_.Unregister(handle_); }
  void Write() {
    auto pin = pager_.Acquire(handle_, nullptr);
    std::memset(pin->data(), 0x5A, pin->bytes());
  }
  // Marks the device copy newer than the host one (so page-out must copy)
  // without spending time on writing it.
  void Dirty() { (void)pager_.Acquire(handle_, nullptr, Access::kReadWrite); }
  TensorHandle handle() const { return handle_; }

 private:
  Pager& pager_;
  TensorHandle handle_;
};

void BM_PageOut(benchmark::State& state) {
  Pager& pager = *Get().pager;
  Tensor tensor(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    tensor.Dirty();
    state.ResumeTiming();
    Check(pager.PageOut(tensor.handle()), state);
    Check(pager.Synchronize(), state);
    state.PauseTiming();
    Check(pager.PageIn(tensor.handle()), state);
    Check(pager.Synchronize(), state);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_PageIn(benchmark::State& state) {
  Pager& pager = *Get().pager;
  Tensor tensor(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    Check(pager.PageOut(tensor.handle()), state);  // clean: no copy, frees the block
    Check(pager.Synchronize(), state);
    state.ResumeTiming();
    Check(pager.PageIn(tensor.handle()), state);
    Check(pager.Synchronize(), state);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

// memcpy between a device-pool block and a host-pool block, `to_host` says
// which way.
void Memcpy(benchmark::State& state, bool to_host) {
  const size_t bytes = state.range(0);
  Setup& s = Get();
  void* device = s.system->pool(0).Allocate(bytes, Tag::kOther).value();
  void* host = s.host->Allocate(bytes, Tag::kOther).value();
  std::memset(device, 1, bytes);
  std::memset(host, 2, bytes);
  void* dst = to_host ? host : device;
  const void* src = to_host ? device : host;
  for (auto _ : state) {
    std::memcpy(dst, src, bytes);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  (void)s.system->pool(0).Deallocate(device, bytes);
  (void)s.host->Deallocate(host, bytes);
}

void BM_MemcpyToHost(benchmark::State& state) { Memcpy(state, true); }
void BM_MemcpyToDevice(benchmark::State& state) { Memcpy(state, false); }

// The copies run on the streams' worker threads: wall time is what counts.
BENCHMARK(BM_MemcpyToHost)->RangeMultiplier(2)->Range(64 << 20, kLargest)->UseRealTime();
BENCHMARK(BM_PageOut)->RangeMultiplier(2)->Range(64 << 20, kLargest)->UseRealTime();
BENCHMARK(BM_MemcpyToDevice)->RangeMultiplier(2)->Range(64 << 20, kLargest)->UseRealTime();
BENCHMARK(BM_PageIn)->RangeMultiplier(2)->Range(64 << 20, kLargest)->UseRealTime();

void PrintRatios(const RatioReporter& reporter) {
  std::printf("\npager bandwidth / memcpy bandwidth, same sizes, same run (1.00 = memcpy speed):\n");
  for (size_t bytes = 64 * kMiB; bytes <= kLargest; bytes *= 2) {
    const std::string arg = "/" + std::to_string(bytes) + "/real_time";
    const double out = reporter.seconds("BM_PageOut" + arg);
    const double in = reporter.seconds("BM_PageIn" + arg);
    const double to_host = reporter.seconds("BM_MemcpyToHost" + arg);
    const double to_device = reporter.seconds("BM_MemcpyToDevice" + arg);
    if (out > 0 && in > 0 && to_host > 0 && to_device > 0) {
      const double gib = static_cast<double>(bytes) / kGiB;
      std::printf("  %10s  page-out %6.2f GiB/s (memcpy %6.2f) ratio %.2f   "
                  "page-in %6.2f GiB/s (memcpy %6.2f) ratio %.2f\n",
                  FormatBytes(bytes).c_str(), gib / out, gib / to_host, to_host / out, gib / in,
                  gib / to_device, to_device / in);
    }
  }
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  // No goal stated: only errors fail.
  return zero::RunWithGoals(argc, argv, [](const zero::RatioReporter& reporter, zero::Goals&) {
    zero::PrintRatios(reporter);
  });
}
