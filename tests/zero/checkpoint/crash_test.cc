// Crash consistency: a save killed (SIGKILL) at any step that changes the
// disk (every create, write, fsync, rename and folder fsync: the fault hook
// of zero/checkpoint/internal/file_io.h), or failing there for a full disk,
// leaves a checkpoint folder that loads as exactly the previous complete
// checkpoint or the new one: never a mix, never an error.
//
// Every process that trains or saves is a fork()ed child (the parent makes
// no threads, so each fork is safe); children report through exit codes
// and a pipe. Knobs: ZERO_CRASH_POINTS (default 10 per mode, for the suite's
// time; bench/soak.sh runs every step) points out of the save's steps,
// chosen by ZERO_CRASH_SEED (default 14), plus its last steps.
// Each test runs with a plain Save and with an AsyncSaver whose ranks train
// a step while the background writer writes (and is killed or fails).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/zero/checkpoint/cluster.h"
#include "tests/zero/checkpoint/expect.h"
#include "tests/zero/test_util.h"
#include "zero/checkpoint/internal/file_io.h"

namespace zero::testing_model {
namespace {

constexpr int kFirstSave = 2, kSecondSave = 4;  // steps trained at each save
// Wide enough that a save of 4 KiB writes has over 60 steps to fail at.
constexpr int kHidden = 32;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// ----------------------------------------------------------- fault hooks

std::atomic<int64_t> steps_seen{0};
int64_t fail_at = 0;  // the step (1-based) that is killed or fails

absl::Status Count(checkpoint::FileOp, std::string_view) {
  ++steps_seen;
  return absl::OkStatus();
}

absl::Status KillAt(checkpoint::FileOp, std::string_view) {
  if (++steps_seen == fail_at) raise(SIGKILL);
  return absl::OkStatus();
}

absl::Status DiskFullAt(checkpoint::FileOp, std::string_view) {
  if (++steps_seen == fail_at) return absl::ResourceExhaustedError("No space left on device");
  return absl::OkStatus();
}

// ----------------------------------------------------------- the children

absl::StatusOr<std::unique_ptr<Cluster>> NewCluster(const Model& model, int world) {
  return Cluster::Create(model, SmallRun(world, 2), AdamW());
}

checkpoint::SaveOptions SmallChunks() {
  checkpoint::SaveOptions options;
  options.chunk_elements = 64;  // many chunks and
  options.write_bytes = 4096;   // many writes, so many points
  options.snapshot_bytes = 4 * 4096;
  return options;
}

// What the reference child sends: the states' hashes at each save and how
// many steps the second save took.
struct Reference {
  uint64_t first = 0, second = 0;
  int64_t steps = 0;
};

// The second save: plain, or asynchronous with a step trained between
// Start and Wait (which must not change what is written).
absl::Status SaveSecond(Cluster& cluster, const std::string& root, bool async) {
  if (!async) return AllOk(cluster.Save(root, SmallChunks()));
  std::vector<std::unique_ptr<checkpoint::AsyncSaver>> savers(cluster.world());
  RETURN_IF_ERROR(AllOk(cluster.Run([&](int rank) {
    savers[rank] =
        std::make_unique<checkpoint::AsyncSaver>(cluster.participant(rank), SmallChunks());
    return savers[rank]->Start(root);
  })));
  RETURN_IF_ERROR(cluster.Train(kSecondSave, kSecondSave + 1));
  return AllOk(cluster.Run([&](int rank) { return savers[rank]->Wait().status(); }));
}

// Trains, saves at kFirstSave (no faults) and kSecondSave with `hook`.
// Fills `ref` as it goes; the second save's outcome is returned.
absl::Status TrainAndSaveTwice(const std::string& root, checkpoint::FaultHook hook, bool async,
                               Reference* ref) {
  std::unique_ptr<Model> model = SmallTransformer(kHidden);
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, NewCluster(*model, 2));
  RETURN_IF_ERROR(cluster->Train(0, kFirstSave));
  ASSIGN_OR_RETURN(ModelStates first, cluster->States());
  RETURN_IF_ERROR(AllOk(cluster->Save(root, SmallChunks())));
  RETURN_IF_ERROR(cluster->Train(kFirstSave, kSecondSave));
  ASSIGN_OR_RETURN(ModelStates second, cluster->States());
  ref->first = Hash(first);
  ref->second = Hash(second);
  checkpoint::SetFaultHookForTesting(hook);
  absl::Status saved = SaveSecond(*cluster, root, async);
  checkpoint::SetFaultHookForTesting(nullptr);
  ref->steps = steps_seen;
  return saved;
}

// The states `root` loads as (into 3 ranks: the reads reshard), hashed.
absl::StatusOr<uint64_t> LoadedHash(const std::string& root) {
  std::unique_ptr<Model> model = SmallTransformer(kHidden);
  ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster, NewCluster(*model, 3));
  RETURN_IF_ERROR(AllOk(cluster->Load(root)));
  ASSIGN_OR_RETURN(ModelStates states, cluster->States());
  return Hash(states);
}

// Runs fn in a child; its exit status (as waitpid gives it) and what it wrote.
template <typename T>
std::pair<int, T> InChild(const std::function<int(T&)>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, T{}};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    T out{};
    const int code = fn(out);
    (void)!write(fds[1], &out, sizeof out);
    _exit(code);
  }
  close(fds[1]);
  T out{};
  const bool got = read(fds[0], &out, sizeof out) == sizeof out;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {status, got ? out : T{}};
}

int Report(const absl::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

// ------------------------------------------------------------ the tests

class CrashTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto [status, ref] = InChild<Reference>([](Reference& r) {
      return Report(TrainAndSaveTwice(FreshDir("reference"), &Count, GetParam(), &r));
    });
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reference run failed";
    ref_ = ref;
    ASSERT_GE(ref_.steps, 50 + kTail) << "too few steps in a save to choose 50 points";
    ASSERT_NE(ref_.first, ref_.second);
  }

  // ZERO_CRASH_POINTS distinct steps of the save (1-based) in a seeded
  // order, then always its last kTail steps and one past the last (no fault):
  // the manifest and `latest`, where the outcome turns.
  static constexpr int64_t kTail = 10;
  std::vector<int64_t> Points() const {
    std::vector<int64_t> all(ref_.steps - kTail);
    for (int64_t i = 0; i < static_cast<int64_t>(all.size()); ++i) all[i] = i + 1;
    std::shuffle(all.begin(), all.end(), std::mt19937_64(EnvInt("ZERO_CRASH_SEED", 14)));
    all.resize(std::min<size_t>(all.size(), EnvInt("ZERO_CRASH_POINTS", 10)));
    for (int64_t i = ref_.steps - kTail + 1; i <= ref_.steps + 1; ++i) all.push_back(i);
    return all;
  }

  // Which checkpoint `root` loads as: 1 the first, 2 the second, 0 neither.
  int LoadsAs(const std::string& root) const {
    const Reference ref = ref_;
    auto [status, hash] = InChild<uint64_t>([&](uint64_t& h) {
      absl::StatusOr<uint64_t> loaded = LoadedHash(root);
      if (loaded.ok()) h = *loaded;
      return Report(loaded.status());
    });
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 0;
    return hash == ref.first ? 1 : hash == ref.second ? 2 : 0;
  }

  Reference ref_;
};

TEST_P(CrashTest, KilledAtAnyStepLoadsOneWholeCheckpoint) {
  int loaded_as[3] = {0, 0, 0};
  for (int64_t point : Points()) {
    const std::string root = FreshDir("killed");
    auto [status, unused] = InChild<Reference>([&](Reference& r) {
      fail_at = point;
      return Report(TrainAndSaveTwice(root, &KillAt, GetParam(), &r));
    });
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    const bool finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    ASSERT_TRUE(killed || finished) << "step " << point << ": status " << status;
    EXPECT_EQ(killed, point <= ref_.steps) << "step " << point;
    const int as = LoadsAs(root);
    EXPECT_NE(as, 0) << "killed at step " << point << " of " << ref_.steps
                     << ": the folder loads as neither checkpoint";
    if (!killed) {
      EXPECT_EQ(as, 2) << "a finished save must load as itself";
    }
    ++loaded_as[as];
  }
  std::printf(
      "crash: killed at %zu points of a %lld-step %s save: "
      "%d loaded the previous, %d the new\n",
      Points().size(), static_cast<long long>(ref_.steps), GetParam() ? "async" : "plain",
      loaded_as[1], loaded_as[2]);
  EXPECT_GT(loaded_as[1], 0) << "no point fell before the new checkpoint was published";
  EXPECT_GT(loaded_as[2], 0) << "no point fell after it";
}

TEST_P(CrashTest, DiskFullAtAnyStepFailsAndKeepsTheLastCheckpoint) {
  for (int64_t point : Points()) {
    const std::string root = FreshDir("full");
    auto [status, unused] = InChild<Reference>([&](Reference& r) {
      fail_at = point;
      const absl::Status saved = TrainAndSaveTwice(root, &DiskFullAt, GetParam(), &r);
      if (point <= r.steps && saved.ok()) return 3;  // the fault went unnoticed
      if (point <= r.steps && !absl::IsResourceExhausted(saved)) return Report(saved) + 3;
      return 0;
    });
    ASSERT_TRUE(WIFEXITED(status)) << "step " << point;
    ASSERT_EQ(WEXITSTATUS(status), 0)
        << "step " << point << ": 3 = Save did not report the full disk, 4 = another error";
    const int as = LoadsAs(root);
    // Only a fault in the last step (the fsync of the root after `latest`
    // moved) fails a save that is already published and complete.
    EXPECT_EQ(as, point >= ref_.steps ? 2 : 1)
        << "disk full at step " << point << " of " << ref_.steps;
  }
  std::printf("crash: disk full at %zu points of a %lld-step %s save\n", Points().size(),
              static_cast<long long>(ref_.steps), GetParam() ? "async" : "plain");
}

INSTANTIATE_TEST_SUITE_P(PlainAndAsync, CrashTest, ::testing::Bool());

}  // namespace
}  // namespace zero::testing_model
