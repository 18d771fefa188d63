// Checkpoints at the disk's speed (issue 17), against limits measured in the
// same run on the same filesystem: 4 host ranks (threads), stage 2, AdamW.
//   - Save throughput over an O_DIRECT write + fdatasync of the same bytes
//     (4 threads, 8 MiB writes): goal >= 0.85;
//   - Load throughput over an O_DIRECT read of the same bytes: goal >= 0.85
//     for the streaming Load issue 17 describes (each chunk read once,
//     verified and placed: LoadOptions::verify_before_placing = false); the
//     default verifies everything, the ranks agree, then it places, reading
//     again what did not fit in --staging_mb: its bound at the disk's speed,
//     1 / (times the files were read), is printed beside it;
//   - training time lost to an async save over a synchronous Save: goal
//     <= 0.2. A training step (every gradient handed over, then Step) with
//     AsyncSaver::Start before it, minus the same step without; of that,
//     the time blocked: Start plus the Step's wait for the snapshot
//     (EngineStats::owned_state_wait_seconds), the longest of any rank
//     (the rest is cores the copy and the writer share with training on
//     host devices). Savers kept across rounds as in training: one with a
//     snapshot as large as the state, reserved at setup (its Reserve and
//     first Start printed apart), one with default SaveOptions. Beside
//     them: Start alone, and a memcpy of the ranks' bytes by 4 threads,
//     what a Start that copied would block;
//   - peak host memory during Load over the budget: the process's resident
//     memory sampled every 0.5 ms during both Loads over the ranks' budgets,
//     goal <= 1.2 (the plan's own bound is printed beside it);
//   - CRC-32C GB/s on one core.
// Each ratio is taken within a round (the limits, then each operation on
// the same bytes) and its median over --rounds printed with its range.
//   bazel run -c opt //bench:checkpoint_bench -- --params_m=100 --dir=/tmp/ckbench
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/rank_group.h"
#include "bench/resident_memory.h"
#include "base/crc32c.h"
#include "base/direct_file.h"
#include "base/status_macros.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/engine.h"

ABSL_FLAG(int, params_m, 100, "model size in millions of parameters");
ABSL_FLAG(std::string, dir, "/tmp/checkpoint_bench", "folder on the filesystem to measure");
ABSL_FLAG(int, staging_mb, 256, "Load's staging budget per rank, MiB");
ABSL_FLAG(int, read_mb, 16, "Load's reads, MiB each at most");
ABSL_FLAG(int, reads_in_flight, 4, "Load's reads queued at once per rank");
ABSL_FLAG(int, rounds, 5, "rounds of limits, save and loads; medians reported");

namespace zero {
namespace {

constexpr int kRanks = 4;
constexpr size_t kIoBytes = size_t{8} << 20;

double Seconds(const std::function<absl::Status()>& fn, absl::Status* status) {
  const auto start = std::chrono::steady_clock::now();
  *status = fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The process's CPU time so far, all threads, user and system.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Layers of a GPT block's element counts (h = 1024: 12 h^2 weights, 9 h
// biases) up to `params`; the checkpoint only sees names and counts.
std::vector<ParamSpec> Specs(size_t params) {
  constexpr size_t h = 1024;
  std::vector<ParamSpec> specs;
  for (int l = 0; static_cast<size_t>(l) * (12 * h * h + 9 * h) < params; ++l) {
    specs.push_back({absl::StrCat("layer", l, ".weights"), 12 * h * h, l});
    specs.push_back({absl::StrCat("layer", l, ".biases"), 9 * h, l});
  }
  return specs;
}

checkpoint::Participant ParticipantOf(RankGroup& ranks, int r) {
  return {*ranks.engines[r], *ranks.adam, *ranks.comms[r], *ranks.devices};
}

absl::StatusOr<std::unique_ptr<RankGroup>> MakeRanks(size_t params) {
  const std::vector<ParamSpec> specs = Specs(params);
  size_t numel = 0;
  for (const ParamSpec& s : specs) numel += s.numel;
  EngineConfig config;
  config.stage = 2;
  config.bucket_elements = 25'000'000;
  return MakeRankGroup(kRanks, numel * 4 * 5 + (size_t{256} << 20), config, specs);
}

// Bytes of each rank's data file in `folder`.
std::vector<uint64_t> FileSizes(const std::string& folder) {
  std::vector<uint64_t> sizes;
  for (int r = 0; r < kRanks; ++r) {
    char name[64];
    std::snprintf(name, sizeof name, "/rank-%05d-of-%05d.bin", r, kRanks);
    sizes.push_back(std::filesystem::file_size(folder + name));
  }
  return sizes;
}

// The limits: each rank's bytes written (O_DIRECT, then fdatasync) and read
// back (O_DIRECT) by 4 threads at once, in 8 MiB requests.
// Each rank's bytes written (O_DIRECT, then fdatasync) or read back
// (O_DIRECT) by 4 threads at once, in 8 MiB requests, in dir/limit-<rank>.
absl::Status DirectPass(const std::string& dir, const std::vector<uint64_t>& sizes, bool write) {
  return OnThreads(kRanks, [&](int r) -> absl::Status {
    const std::string path = absl::StrCat(dir, "/limit-", r);
    ASSIGN_OR_RETURN(DirectFile file,
                     DirectFile::Open(path, write ? FileMode::kWrite : FileMode::kRead));
    ASSIGN_OR_RETURN(AlignedBuffer buffer, AllocateAlignedBuffer(kIoBytes));
    std::fill_n(buffer.get(), kIoBytes, std::byte{1});
    for (uint64_t at = 0; at < sizes[r]; at += kIoBytes) {
      const size_t n = std::min<uint64_t>(kIoBytes, RoundUpToAlignment(sizes[r] - at));
      RETURN_IF_ERROR(write ? file.WriteAt(at, buffer.get(), n)
                            : file.ReadAt(at, buffer.get(), n));
    }
    return write ? file.Sync() : absl::OkStatus();
  });
}

void RemoveLimitFiles(const std::string& dir) {
  for (int r = 0; r < kRanks; ++r) std::filesystem::remove(absl::StrCat(dir, "/limit-", r));
}

// The limits: the bytes written, then read back.
absl::Status DirectLimits(const std::string& dir, const std::vector<uint64_t>& sizes,
                          double* write_s, double* read_s) {
  absl::Status s;
  *write_s = Seconds([&] { return DirectPass(dir, sizes, true); }, &s);
  RETURN_IF_ERROR(s);
  *read_s = Seconds([&] { return DirectPass(dir, sizes, false); }, &s);
  RemoveLimitFiles(dir);
  return s;
}

// CRC-32C over 1 GiB in buffers of `bytes`, best of 5: a buffer that stays
// in cache gives the instruction's rate, a large one what a core's memory
// bandwidth leaves (a load checks bytes it has just read, so between the two).
double CrcGbPerSecond(size_t bytes) {
  std::vector<unsigned char> data(bytes, 7);
  const size_t repeats = std::max<size_t>(1, (size_t{1} << 30) / bytes);
  double best = 1e30;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    uint32_t crc = 0;
    for (size_t r = 0; r < repeats; ++r) crc ^= Crc32c(data.data(), data.size());
    volatile uint32_t sink = crc;
    (void)sink;
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return repeats * data.size() / best / 1e9;
}

// A round: the O_DIRECT limits, then each operation on the same bytes. The
// disk of a VM drifts by tens of percent within a minute, so each ratio is
// taken within a round and the median over rounds reported.
struct Round {
  double write_s = 0, read_s = 0, save_s = 0, load_s = 0, one_pass_s = 0;
  double one_pass_cpu_s = 0;  // the process's CPU time (user + system) during it
  double async_total_s = 0, start_s = 0;  // an async save (its saver's buffers reused)
  double copy_s = 0;  // the ranks' bytes copied in memory, 4 threads at once
  // A training step alone, and one with an async save started before it:
  // its wall time, and the longest any rank was blocked (Start, plus the
  // Step's wait for the snapshot); the same with default SaveOptions.
  double step_s = 0, step_saving_s = 0, blocked_s = 0;
  double step_default_s = 0, blocked_default_s = 0;
  double step_writing_s = 0;  // the step beside a plain O_DIRECT write of the bytes
};

// The floor of what an async Start blocks for here, where "device" memory
// is host memory: each rank's bytes copied once, all ranks at once, between
// buffers already faulted in.
struct CopyFloor {
  std::vector<AlignedBuffer> from, to;
  std::vector<uint64_t> sizes;

  static absl::StatusOr<CopyFloor> Create(const std::vector<uint64_t>& sizes) {
    CopyFloor floor;
    floor.sizes = sizes;
    for (uint64_t bytes : sizes) {
      ASSIGN_OR_RETURN(AlignedBuffer a, AllocateAlignedBuffer(bytes));
      ASSIGN_OR_RETURN(AlignedBuffer b, AllocateAlignedBuffer(bytes));
      std::memset(a.get(), 1, bytes);
      std::memset(b.get(), 2, bytes);
      floor.from.push_back(std::move(a));
      floor.to.push_back(std::move(b));
    }
    return floor;
  }
  double Time() {
    absl::Status s;
    return Seconds([&] {
      return OnThreads(kRanks, [&](int r) {
        std::memcpy(to[r].get(), from[r].get(), sizes[r]);
        return absl::OkStatus();
      });
    }, &s);
  }
};

// The median of fn(round) over the rounds, and its range.
struct Spread {
  double median, low, high;
};
Spread Over(const std::vector<Round>& rounds, const std::function<double(const Round&)>& fn) {
  std::vector<double> v;
  for (const Round& r : rounds) v.push_back(fn(r));
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return {n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v.front(), v.back()};
}

// Async savers, one per rank, kept across rounds as in training: Reserve
// at setup allocates and faults in a snapshot as large as the rank's state,
// every Start reuses it. The longest any rank's Start blocked.
struct AsyncSavers {
  std::vector<std::unique_ptr<checkpoint::AsyncSaver>> savers;
  double reserve_s = 0, first_blocked_s = 0;

  absl::Status SaveOnce(const std::string& root, double* blocked_s, double* total_s) {
    std::vector<double> blocked(kRanks);
    absl::Status s;
    *total_s = Seconds(
        [&] {
          return OnThreads(kRanks, [&](int r) -> absl::Status {
            absl::Status started;
            blocked[r] = Seconds([&] { return savers[r]->Start(root); }, &started);
            RETURN_IF_ERROR(started);
            return savers[r]->Wait().status();
          });
        },
        &s);
    *blocked_s = *std::max_element(blocked.begin(), blocked.end());
    return s;
  }
};

// One training step on every rank: each parameter's gradient handed over
// in reverse order (backward), then Step; with `savers`, an async save
// started first and waited for after. The step's wall time; with savers,
// the longest any rank's training was blocked by the save.
absl::Status TrainStep(RankGroup& ranks, const std::vector<float>& grad, AsyncSavers* savers,
                       const std::string& root, double* step_s, double* blocked_s) {
  std::vector<double> blocked(kRanks);
  absl::Status s;
  *step_s = Seconds(
      [&] {
        return ranks.OnRanks([&](int r) -> absl::Status {
          Engine& engine = *ranks.engines[r];
          const double waited = engine.stats().owned_state_wait_seconds;
          absl::Status started;
          if (savers != nullptr) {
            blocked[r] = Seconds([&] { return savers->savers[r]->Start(root); }, &started);
            RETURN_IF_ERROR(started);
          }
          const std::vector<ParamSlot>& params = engine.layout().params();
          for (int id = static_cast<int>(params.size()) - 1; id >= 0; --id) {
            RETURN_IF_ERROR(engine.AddGrad(id, std::span(grad).first(params[id].numel)));
          }
          RETURN_IF_ERROR(engine.Step());
          blocked[r] += engine.stats().owned_state_wait_seconds - waited;
          return absl::OkStatus();
        });
      },
      &s);
  RETURN_IF_ERROR(s);
  if (blocked_s != nullptr) *blocked_s = *std::max_element(blocked.begin(), blocked.end());
  if (savers == nullptr) return absl::OkStatus();
  return ranks.OnRanks([&](int r) { return savers->savers[r]->Wait().status(); });
}

// A training step with a plain O_DIRECT write of the same bytes beside it
// (no copy, no checksum): what any background write costs training here.
absl::Status TrainStepBesideAWrite(RankGroup& ranks, const std::vector<float>& grad,
                                   const std::string& dir, const std::vector<uint64_t>& sizes,
                                   double* step_s) {
  absl::Status written;
  std::thread writer([&] { written = DirectPass(dir, sizes, true); });
  const absl::Status trained = TrainStep(ranks, grad, nullptr, "", step_s, nullptr);
  writer.join();
  RemoveLimitFiles(dir);
  return trained.ok() ? written : trained;
}

void Report(const std::vector<Round>& rounds, const AsyncSavers& async, uint64_t bytes,
            double times_read, double peak_staging, double rss_growth, size_t budget) {
  auto print = [&](const char* what, const std::function<double(const Round&)>& fn,
                   const std::string& note) {
    const Spread v = Over(rounds, fn);
    std::printf("%-40s %.3f  (%s; rounds %.3f-%.3f)\n", what, v.median, note.c_str(), v.low,
                v.high);
  };
  const Spread write = Over(rounds, [](const Round& r) { return r.write_s; });
  const Spread read = Over(rounds, [](const Round& r) { return r.read_s; });
  const Spread save = Over(rounds, [](const Round& r) { return r.save_s; });
  std::printf("limits: O_DIRECT write+fdatasync %.2f GB/s, O_DIRECT read %.2f GB/s (medians)\n",
              bytes / write.median / 1e9, bytes / read.median / 1e9);
  print("save throughput / O_DIRECT write", [](const Round& r) { return r.write_s / r.save_s; },
        absl::StrFormat("goal >= 0.85; median %.2f s", save.median));
  const Spread step = Over(rounds, [](const Round& r) { return r.step_s; });
  print("async save total / O_DIRECT write", [](const Round& r) { return r.write_s / r.async_total_s; },
        "Start, then Wait at once");
  print("training time lost to an async save / Save",
        [](const Round& r) { return (r.step_saving_s - r.step_s) / r.save_s; },
        absl::StrFormat("goal <= 0.2; a training step of %.2f s with the save started before it "
                        "minus without: host devices share the cores with the copy and the "
                        "writer (on a card the copy is a DMA)", step.median));
  print("  of it blocked / Save", [](const Round& r) { return r.blocked_s / r.save_s; },
        "Start, plus the Step's wait for the snapshot's copy: the rest is cores shared");
  print("  a plain O_DIRECT write beside the step: lost / Save",
        [](const Round& r) { return (r.step_writing_s - r.step_s) / r.save_s; },
        "the same bytes written by 4 threads, no copy, no checksum: what writing in the "
        "background costs training on this machine at all");
  print("  default SaveOptions: lost / Save",
        [](const Round& r) { return (r.step_default_s - r.step_s) / r.save_s; },
        "256 MiB of snapshot a rank (less than its state) and no Reserve: the Step waits for "
        "the write of what did not fit");
  print("  default SaveOptions: blocked / Save",
        [](const Round& r) { return r.blocked_default_s / r.save_s; }, "as above");
  print("  Start alone / Save", [](const Round& r) { return r.start_s / r.save_s; },
        "Start then Wait, nothing trained between");
  print("  a memcpy of the bytes / Save", [](const Round& r) { return r.copy_s / r.save_s; },
        "the state copied once, all ranks at once: what a Start that copied would block");
  std::printf("  Reserve at setup (allocates the snapshot): %.3f s; the first save's Start "
              "after it: %.4f s\n",
              async.reserve_s, async.first_blocked_s);
  print("load streaming / O_DIRECT read", [](const Round& r) { return r.read_s / r.one_pass_s; },
        "goal >= 0.85; one pass, verify_before_placing off");
  print("  cores busy during it", [](const Round& r) { return r.one_pass_cpu_s / r.one_pass_s; },
        absl::StrFormat("of %d: CPU time over wall time; host devices place and all-gather "
                        "on the CPU, so near %d the load is bound by the cores, not the disk",
                        std::thread::hardware_concurrency(), std::thread::hardware_concurrency()));
  print("load verifying first / O_DIRECT read", [](const Round& r) { return r.read_s / r.load_s; },
        absl::StrFormat("the default: the files read %.2f times, so at most %.2f", times_read,
                        1 / times_read));
  std::printf("load peak resident growth / budgets      %.3f  (goal <= 1.2; %.1f MiB over %d x "
              "%zu MiB; sampled every 0.5 ms during both Loads)\n",
              rss_growth / (kRanks * budget), rss_growth / 1048576.0, kRanks, budget >> 20);
  std::printf("load staging planned / budget            %.3f  (%.1f MiB of %zu MiB per rank: the "
              "plan's own bound)\n",
              peak_staging / budget, peak_staging / 1048576.0, budget >> 20);
  std::printf("crc32c one core, in cache (256 KiB)      %.2f GB/s  (goal >= 15)\n",
              CrcGbPerSecond(size_t{256} << 10));
  std::printf("crc32c one core, from memory (1 GiB)     %.2f GB/s  (past the caches)\n",
              CrcGbPerSecond(size_t{1} << 30));
}

// One run's setup and its rounds.
struct Bench {
  std::string dir;
  std::unique_ptr<RankGroup> ranks;
  checkpoint::SaveOptions save;  // snapshot as large as a rank's state
  std::vector<uint64_t> sizes;   // each rank's data file
  uint64_t bytes = 0;
  AsyncSavers async, defaults;   // reserved to the state, and default options
  std::vector<float> grad;       // the longest parameter's gradient
  size_t budget = 0;             // Load's staging
  std::vector<checkpoint::LoadStats> stats, one_pass_stats;
  uint64_t rss_growth = 0;

  absl::Status SaveAll() {
    return ranks->OnRanks([&](int r) {
      return checkpoint::Save(ParticipantOf(*ranks, r), dir + "/sync", save).status();
    });
  }
  absl::Status Load(bool verify_first) {
    std::vector<checkpoint::LoadStats>& into = verify_first ? stats : one_pass_stats;
    return ranks->OnRanks([&](int r) {
      return checkpoint::Load(ParticipantOf(*ranks, r), dir + "/sync",
                              {.staging_bytes = budget,
                               .read_bytes = size_t(absl::GetFlag(FLAGS_read_mb)) << 20,
                               .reads_in_flight = absl::GetFlag(FLAGS_reads_in_flight),
                               .verify_before_placing = verify_first,
                               .stats = &into[r]});
    });
  }

  absl::Status Setup() {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    ASSIGN_OR_RETURN(ranks, MakeRanks(size_t(absl::GetFlag(FLAGS_params_m)) * 1'000'000));
    const size_t numel = ranks->engines[0]->layout().numel();
    save.snapshot_bytes = numel * 3 * 4 / kRanks + (size_t{64} << 20);  // all of a rank's state
    RETURN_IF_ERROR(SaveAll());  // the files the limits write and read as many bytes as
    sizes = FileSizes(dir + "/sync/step-0");
    for (uint64_t b : sizes) bytes += b;
    for (int r = 0; r < kRanks; ++r) {
      const checkpoint::Participant participant = ParticipantOf(*ranks, r);
      async.savers.push_back(std::make_unique<checkpoint::AsyncSaver>(participant, save));
      defaults.savers.push_back(std::make_unique<checkpoint::AsyncSaver>(participant));
    }
    absl::Status reserved;
    async.reserve_s = Seconds(
        [&] { return ranks->OnRanks([&](int r) { return async.savers[r]->Reserve(); }); },
        &reserved);
    RETURN_IF_ERROR(reserved);
    double unused;
    RETURN_IF_ERROR(async.SaveOnce(dir + "/async", &async.first_blocked_s, &unused));
    size_t longest = 0;
    for (const ParamSlot& p : ranks->engines[0]->layout().params()) {
      longest = std::max(longest, p.numel);
    }
    grad.assign(longest, 1e-3f);
    budget = size_t(absl::GetFlag(FLAGS_staging_mb)) << 20;
    stats.resize(kRanks);
    one_pass_stats.resize(kRanks);
    return absl::OkStatus();
  }

  // The limits, Save, the async saves (alone, then during training steps),
  // the memcpy floor.
  absl::Status MeasureSaves(Round& round) {
    RETURN_IF_ERROR(DirectLimits(dir, sizes, &round.write_s, &round.read_s));
    absl::Status s;
    round.save_s = Seconds([&] { return SaveAll(); }, &s);
    RETURN_IF_ERROR(s);
    const std::string root = dir + "/async";
    // 1.2 GB a save at the default size: removed, and the removal flushed,
    // before the next timed step.
    auto clear = [&] {
      std::filesystem::remove_all(root);
      ::sync();
    };
    RETURN_IF_ERROR(async.SaveOnce(root, &round.start_s, &round.async_total_s));
    clear();
    // The step without a save: the mean of one before and one after the
    // steps with one (a step's time drifts on this VM).
    double before = 0, after = 0;
    RETURN_IF_ERROR(TrainStep(*ranks, grad, nullptr, "", &before, nullptr));
    RETURN_IF_ERROR(TrainStep(*ranks, grad, &async, root, &round.step_saving_s, &round.blocked_s));
    clear();
    RETURN_IF_ERROR(TrainStep(*ranks, grad, &defaults, root, &round.step_default_s,
                              &round.blocked_default_s));
    clear();
    RETURN_IF_ERROR(TrainStepBesideAWrite(*ranks, grad, dir, sizes, &round.step_writing_s));
    ::sync();
    RETURN_IF_ERROR(TrainStep(*ranks, grad, nullptr, "", &after, nullptr));
    round.step_s = (before + after) / 2;
    // 2 x the checkpoint, held only while measured: not beside the Loads.
    ASSIGN_OR_RETURN(CopyFloor floor, CopyFloor::Create(sizes));
    round.copy_s = floor.Time();
    return absl::OkStatus();
  }

  // Both Loads, alternating which goes first: the second finds the pages
  // the first freed still warm, a fresh process's Load does not.
  absl::Status MeasureLoads(size_t k, Round& round) {
    absl::Status s;
    for (const bool verify_first : {k % 2 == 0, k % 2 != 0}) {
      rss_growth = std::max(rss_growth, PeakResidentGrowth([&] {
                              double& t = verify_first ? round.load_s : round.one_pass_s;
                              const double cpu = CpuSeconds();
                              t = Seconds([&] { return Load(verify_first); }, &s);
                              if (!verify_first) round.one_pass_cpu_s = CpuSeconds() - cpu;
                            }));
      RETURN_IF_ERROR(s);
    }
    return absl::OkStatus();
  }
};

absl::Status Run() {
  Bench bench;
  bench.dir = absl::GetFlag(FLAGS_dir);
  RETURN_IF_ERROR(bench.Setup());
  std::vector<Round> rounds(std::max(1, absl::GetFlag(FLAGS_rounds)));
  for (size_t k = 0; k < rounds.size(); ++k) {
    RETURN_IF_ERROR(bench.MeasureSaves(rounds[k]));
    RETURN_IF_ERROR(bench.MeasureLoads(k, rounds[k]));
  }
  uint64_t peak_staging = 0, load_read = 0;
  for (const auto& st : bench.stats) {
    peak_staging = std::max(peak_staging, st.peak_staging_bytes);
    load_read += st.bytes_read;
  }
  std::printf(
      "checkpoint: %zu parameters, %d ranks, stage 2, AdamW: %.2f GB on disk in %s "
      "(O_DIRECT %s); %zu rounds\n",
      bench.ranks->engines[0]->layout().numel(), kRanks, bench.bytes / 1e9, bench.dir.c_str(),
      bench.stats[0].direct ? "taken" : "refused", rounds.size());
  Report(rounds, bench.async, bench.bytes, double(load_read) / bench.bytes, double(peak_staging),
         double(bench.rss_growth), bench.budget);
  std::filesystem::remove_all(bench.dir);
  return absl::OkStatus();
}

}  // namespace
}  // namespace zero

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = zero::Run();
  if (!s.ok()) std::fprintf(stderr, "checkpoint_bench: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
