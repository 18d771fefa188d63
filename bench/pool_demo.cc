// The pool demonstration: replays a generated transformer training trace on
// one device and prints the pool's statistics, snapshot size and timeline.
// Exits 1 when reserved/allocated misses the goal (unless --report_only).
//   bazel run -c opt //bench:pool_demo -- --zero_devices=host:1x16GiB
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/units.h"
#include "bench/trace.h"
#include "memory/device_system.h"

ABSL_FLAG(int, layers, 12, "transformer blocks");
ABSL_FLAG(int, hidden, 768, "hidden size");
ABSL_FLAG(int, heads, 12, "attention heads (a divisor of --hidden)");
ABSL_FLAG(int, batch, 4, "micro-batch size");
ABSL_FLAG(int, seq, 512, "sequence length");
ABSL_FLAG(std::string, timeline, "", "write the pool's timeline to this CSV file");
ABSL_FLAG(bool, report_only, false, "exit 0 even when the fragmentation goal is missed");

constexpr double kFragmentationGoal = 1.10;  // peak reserved / peak allocated

// Per tag, the peak and the allocations; the pool's mappings; the JSON.
void PrintPoolStats(const zero::PoolStats& s) {
  std::printf("%-16s %12s %12s\n", "tag", "peak", "allocations");
  for (int t = 0; t < zero::kNumTags; ++t) {
    std::printf("%-16s %12s %12llu\n", std::string(zero::kTagNames[t]).c_str(),
                zero::FormatBytes(s.tags[t].peak).c_str(),
                static_cast<unsigned long long>(s.tags[t].total));
  }
  std::printf("maps %llu, unmaps %llu, out-of-memory %llu\n",
              static_cast<unsigned long long>(s.num_maps),
              static_cast<unsigned long long>(s.num_unmaps),
              static_cast<unsigned long long>(s.num_ooms));
  std::printf("stats: %s\n", zero::PoolStatsJson(s).c_str());
}

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto system = zero::DeviceSystem::CreateFromEnvironment();
  if (!system.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(system.status().message()).c_str());
    return 2;
  }
  const int layers = absl::GetFlag(FLAGS_layers), hidden = absl::GetFlag(FLAGS_hidden);
  const int heads = absl::GetFlag(FLAGS_heads);
  if (heads < 1 || hidden % heads != 0) {
    std::fprintf(stderr, "error: --hidden (%d) must be a multiple of --heads (%d)\n", hidden,
                 heads);
    return 2;
  }
  zero::TraceOptions options;
  options.batch = absl::GetFlag(FLAGS_batch);
  options.seq = absl::GetFlag(FLAGS_seq);
  const auto trace =
      zero::TransformerTrace(zero::TraceShape(layers, hidden, heads, options.seq), options);
  zero::DevicePool& pool = (*system)->pool(0);
  auto result = zero::Replay(trace, pool);
  if (!result.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::printf("replayed %zu operations of %d training steps (%d layers, hidden %d) on %s device 0\n",
              result->ops, options.steps, layers, hidden,
              std::string(zero::DeviceKindName((*system)->kind())).c_str());
  const double fragmentation = double(result->peak_reserved) / double(result->peak_allocated);
  std::printf("peak allocated %s, peak reserved %s: reserved/allocated = %.3f (goal <= %.2f)\n",
              zero::FormatBytes(result->peak_allocated).c_str(),
              zero::FormatBytes(result->peak_reserved).c_str(), fragmentation, kFragmentationGoal);
  std::printf("peak requested %s: reserved/requested = %.3f\n",
              zero::FormatBytes(result->peak_requested).c_str(),
              double(result->peak_reserved) / double(result->peak_requested));
  PrintPoolStats(pool.stats());
  if (const std::string path = absl::GetFlag(FLAGS_timeline); !path.empty()) {
    if (auto status = pool.timeline().WriteCsv(path); !status.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(status.message()).c_str());
      return 1;
    }
    std::printf("timeline written to %s\n", path.c_str());
  }
  if (fragmentation > kFragmentationGoal) {
    std::printf("GOAL MISSED: reserved/allocated %.3f > %.2f\n", fragmentation, kFragmentationGoal);
    if (!absl::GetFlag(FLAGS_report_only)) return 1;
  }
  return 0;
}
