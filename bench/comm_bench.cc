// Local-backend collectives over 8 ranks (threads), as a fraction of the
// machine's memcpy bandwidth measured in the same run (all cores copying).
// Two counts of bytes per call, summed over ranks, each divided by the call's
// time:
//  - "model": "bus bandwidth" as nccl-tests report it, the bytes the ring
//    model says every rank receives (comm_stats.h). It is the model's count,
//    not what this backend does: a ring over a network would move them.
//  - "backend": what the local backend really did, counted by it
//    (CommStats::copied_bytes, reduced_bytes): bytes memcpy'd between
//    buffers plus bytes written by reductions (each read from all 8 ranks).
// A shared-memory copy at memcpy speed would score 1.0 on the backend count.
// Exits 1 when a run fails.
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

// One group and its buffers per collective and size, shared by the
// benchmark's threads; its stats then hold that collective's calls only.
// Offsets keep every copy's dst - src at least 256 bytes from a page
// multiple: send r at r*256, recv r at 2048 + r*256.
struct Fixture {
  std::vector<std::unique_ptr<Communicator>> group;
  std::vector<Buffer> send, recv;
};

using FixtureKey = std::pair<CollectiveKind, int64_t>;

std::map<FixtureKey, Fixture>& Fixtures() {
  static auto* fixtures = new std::map<FixtureKey, Fixture>();
  return *fixtures;
}

Fixture& GetFixture(CollectiveKind kind, int64_t bytes) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  Fixture& f = Fixtures()[{kind, bytes}];
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
  Fixture& f = GetFixture(CollectiveKind::kAllReduce, state.range(0));
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
  Fixture& f = GetFixture(CollectiveKind::kAllGather, state.range(0));
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

// Bytes per call, summed over ranks: the ring model's count, and what the
// backend copied and reduced (averaged over every call the group made).
struct CallBytes {
  double model = 0, copied = 0, reduced = 0;
};

CallBytes BytesPerCall(CollectiveKind kind, int64_t bytes) {
  CallBytes b;
  const auto it = Fixtures().find({kind, bytes});
  if (it == Fixtures().end()) return b;
  uint64_t calls = 0, model = 0, copied = 0, reduced = 0;
  for (const auto& comm : it->second.group) {
    const CommStats stats = comm->stats();
    calls += stats[kind].calls;
    model += stats[kind].bytes_received;
    copied += stats.copied_bytes;
    reduced += stats.reduced_bytes;
  }
  if (calls == 0) return b;
  const double per_call = static_cast<double>(kRanks) / static_cast<double>(calls);
  return {model * per_call, copied * per_call, reduced * per_call};
}

void PrintRatios(const RatioReporter& reporter) {
  std::printf("\n%d ranks; bytes per call summed over ranks, per second, / memcpy bandwidth on "
              "%d cores:\n  model = ring-model bytes received (not what this backend moves); "
              "backend = bytes it memcpy'd + bytes its reductions wrote\n",
              kRanks, Cores());
  for (int64_t bytes : kSizes) {
    const double copy_s = IterationSeconds(reporter, "BM_Memcpy", bytes, Cores());
    if (copy_s <= 0) continue;
    const double memcpy_bw = Cores() * double(bytes) / copy_s;
    for (const char* name : {"BM_AllReduce", "BM_AllGather"}) {
      const double s = IterationSeconds(reporter, name, bytes, kRanks);
      if (s <= 0) continue;
      const CallBytes b = BytesPerCall(std::string(name) == "BM_AllReduce"
                                           ? CollectiveKind::kAllReduce
                                           : CollectiveKind::kAllGather,
                                       bytes);
      const double backend = b.copied + b.reduced;
      std::printf("  %-9s %8lld B/rank  model %9.0f B %7.2f GB/s ratio %.2f  backend %9.0f B "
                  "(copied %.0f + reduced %.0f) %7.2f GB/s ratio %.2f  memcpy %7.2f GB/s\n",
                  name + 3, static_cast<long long>(bytes), b.model, b.model / s / 1e9,
                  b.model / s / memcpy_bw, backend, b.copied, b.reduced, backend / s / 1e9,
                  backend / s / memcpy_bw, memcpy_bw / 1e9);
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
