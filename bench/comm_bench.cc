// Local-backend collectives over 8 ranks (threads), as a fraction of the
// machine's memcpy bandwidth measured in the same run (all cores copying).
// Collective bandwidth is "bus bandwidth" as nccl-tests report it: the bytes
// the ring model says every rank receives (comm_stats.h), summed over ranks,
// per second; a shared-memory copy at memcpy speed would score 1.0.
//   bazel run -c opt //bench:comm_bench
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "zero/comm/comm_stats.h"
#include "zero/comm/local_communicator.h"

namespace zero {
namespace {

constexpr int kRanks = 8;
constexpr int64_t kSizes[] = {64 << 10, 1 << 20, 16 << 20};  // bytes per rank

int Cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// Page-aligned bytes starting `offset` into the page. Where it starts
// matters: glibc's memcpy runs ~20x slower when dst - src is a small
// multiple of 16 modulo 4096 (4K aliasing), as for neighboring malloc blocks.
class Buffer {
 public:
  Buffer(size_t bytes, size_t offset)
      : base_(static_cast<char*>(std::aligned_alloc(4096, (bytes + offset + 4095) / 4096 * 4096))),
        data_(base_ + offset) {
    std::memset(data_, 1, bytes);
  }
  Buffer(Buffer&& other) noexcept : base_(std::exchange(other.base_, nullptr)), data_(other.data_) {}
  ~Buffer() { std::free(base_); }
  float* floats() { return reinterpret_cast<float*>(data_); }
  char* bytes() { return data_; }

 private:
  char* base_;
  char* data_;
};

// One group and its buffers per size, shared by the benchmark's threads.
// Offsets keep every copy's dst - src at least 256 bytes from a page
// multiple: send r at r*256, recv r at 2048 + r*256.
struct Fixture {
  std::vector<std::unique_ptr<Communicator>> group;
  std::vector<Buffer> send, recv;
};

Fixture& GetFixture(int64_t bytes) {
  static std::mutex mu;
  static auto* fixtures = new std::map<int64_t, Fixture>();
  std::lock_guard lock(mu);
  Fixture& f = (*fixtures)[bytes];
  if (f.group.empty()) {
    f.group = LocalGroup::Create(kRanks).value();
    for (int r = 0; r < kRanks; ++r) {
      f.send.emplace_back(bytes * kRanks, r * 256);
      f.recv.emplace_back(bytes * kRanks, 2048 + r * 256);
    }
  }
  return f;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = state.range(0);
  Buffer src(bytes, 0), dst(bytes, 2048);
  for (auto _ : state) {
    std::memcpy(dst.bytes(), src.bytes(), bytes);
    benchmark::DoNotOptimize(dst.bytes());
    benchmark::ClobberMemory();
  }
}

void BM_AllReduce(benchmark::State& state) {
  Fixture& f = GetFixture(state.range(0));
  const int r = state.thread_index();
  const size_t count = state.range(0) / sizeof(float);
  for (auto _ : state) {
    absl::Status s = f.group[r]->AllReduce(f.send[r].floats(), f.recv[r].floats(), count, DType::kF32,
                                           ReduceOp::kSum, nullptr);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
}

// Each rank contributes range(0) / kRanks bytes, so every rank ends with
// range(0) bytes, the same output size as the all-reduce.
void BM_AllGather(benchmark::State& state) {
  Fixture& f = GetFixture(state.range(0));
  const int r = state.thread_index();
  const size_t count = state.range(0) / sizeof(float) / kRanks;
  for (auto _ : state) {
    absl::Status s =
        f.group[r]->AllGather(f.send[r].floats(), f.recv[r].floats(), count, DType::kF32, nullptr);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : kSizes) b->Arg(bytes);
}

BENCHMARK(BM_Memcpy)->Apply(Sizes)->UseRealTime()->Threads(Cores());
BENCHMARK(BM_AllReduce)->Apply(Sizes)->UseRealTime()->Threads(kRanks);
BENCHMARK(BM_AllGather)->Apply(Sizes)->UseRealTime()->Threads(kRanks);

// Seconds one iteration of every thread took together: the reporter divides
// real time by iterations summed over threads.
double IterationSeconds(const RatioReporter& reporter, const std::string& name, int64_t bytes,
                        int threads) {
  return threads * reporter.seconds(name + "/" + std::to_string(bytes) +
                                    "/real_time/threads:" + std::to_string(threads));
}

void PrintRatios(const RatioReporter& reporter) {
  std::printf("\n%d ranks, bus bandwidth / memcpy bandwidth on %d cores (higher is better):\n",
              kRanks, Cores());
  for (int64_t bytes : kSizes) {
    const double copy_s = IterationSeconds(reporter, "BM_Memcpy", bytes, Cores());
    if (copy_s <= 0) continue;
    const double memcpy_bw = Cores() * double(bytes) / copy_s;
    for (const char* name : {"BM_AllReduce", "BM_AllGather"}) {
      const double s = IterationSeconds(reporter, name, bytes, kRanks);
      if (s <= 0) continue;
      const bool all_reduce = std::string(name) == "BM_AllReduce";
      const size_t count = bytes / sizeof(float) / (all_reduce ? 1 : kRanks);
      const CollectiveCall call =
          all_reduce ? CollectiveCall::AllReduce(count, DType::kF32, ReduceOp::kSum)
                     : CollectiveCall::AllGather(count, DType::kF32);
      double moved = 0;
      for (int r = 0; r < kRanks; ++r) moved += RingTraffic(call, r, kRanks).bytes_received;
      std::printf("  %-13s %8lld B/rank  bus %7.2f GB/s  memcpy %7.2f GB/s  ratio %.2f\n", name + 3,
                  static_cast<long long>(bytes), moved / s / 1e9, memcpy_bw / 1e9,
                  moved / s / memcpy_bw);
    }
  }
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  zero::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  zero::PrintRatios(reporter);
  return 0;
}
