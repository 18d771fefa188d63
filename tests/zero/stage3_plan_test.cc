// Stage 3's prefetch plan, step by step: which unit is gathered when, for a
// fixed run of rank 0 of a 4-rank group on a meta device. A communicator
// that logs each all-gather (the units have distinct sizes, so the size
// names the module) and a driver that logs each Fetch and Release give one
// line per step; the expected lines were worked out by hand from the rules
// in zero/engine_stage3.cc (a window of prefetch_elements over the recorded
// order, counting entries gathered or not; gathers within
// max_live_elements; a unit the window found gathered stays until its
// claimed use). Any change to when a unit is gathered or freed shows here.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "memory/device_system.h"
#include "optimizers/sgd.h"
#include "zero/comm/communicator.h"
#include "zero/engine.h"

namespace zero {
namespace {

constexpr int kWorld = 4;
// Module m has 640 * (m + 1) elements: already a multiple of 4 * 16, so
// padded sizes equal these and every all-gather's count names its module.
constexpr int kModules = 6;
size_t ModuleNumel(int m) { return 640 * (m + 1); }

// Rank 0 of a group that exists only as arithmetic, logging all-gathers.
class LoggingCommunicator final : public Communicator {
 public:
  explicit LoggingCommunicator(std::vector<std::string>* log) : log_(log) {}
  int rank() const override { return 0; }
  int world_size() const override { return kWorld; }
  void Abort(const absl::Status&) override {}
  absl::Status AsyncError() const override { return absl::OkStatus(); }

 protected:
  absl::Status Execute(const CollectiveCall& call, const void*, void*, Stream*,
                       const absl::Status& invalid) override {
    if (!invalid.ok()) return invalid;
    if (call.kind != CollectiveKind::kAllGather) return absl::OkStatus();
    for (int m = 0; m < kModules; ++m) {
      if (call.count * kWorld == ModuleNumel(m)) log_->push_back(absl::StrCat("G", m));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string>* log_;
};

struct Trace {
  std::vector<std::string> steps;  // one line per step
  size_t peak_live = 0;            // most gathered elements at once
};

// Forward 0..5, then backward 5..0 handing over each module's gradient.
absl::StatusOr<Trace> Train(EngineConfig config, int steps) {
  std::vector<std::string> log;
  LoggingCommunicator comm(&log);
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceSystem> devices,
                   DeviceSystem::Create({DeviceSpec::Kind::kMeta, 1, size_t{1} << 30}));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> sgd, MakeSgd({}));
  std::vector<ParamSpec> specs;
  for (int m = 0; m < kModules; ++m) specs.push_back({absl::StrCat("w", m), ModuleNumel(m), m});
  config.stage = 3;
  config.persistence_threshold = 0;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(config, specs, sgd.get(), &comm, devices.get(), 0));
  Trace run;
  std::vector<int> order;
  for (int m = 0; m < kModules; ++m) order.push_back(m);
  for (int m = kModules; m-- > 0;) order.push_back(m);
  for (int step = 0; step < steps; ++step) {
    log.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      const int m = order[i];
      log.push_back(absl::StrCat("F", m));
      RETURN_IF_ERROR(engine->Fetch(m));
      run.peak_live = std::max(run.peak_live, engine->live_gathered_elements());
      if (i >= kModules) RETURN_IF_ERROR(engine->AddGrad(m, nullptr, ModuleNumel(m)));
      log.push_back(absl::StrCat("R", m));
      RETURN_IF_ERROR(engine->Release(m));
    }
    RETURN_IF_ERROR(engine->Step());
    run.steps.push_back(absl::StrJoin(log, " "));
  }
  return run;
}

// The first step has no plan: each Fetch gathers its module in line.
constexpr char kOnDemand[] =
    "F0 G0 R0 F1 G1 R1 F2 G2 R2 F3 G3 R3 F4 G4 R4 F5 G5 R5 "
    "F5 G5 R5 F4 G4 R4 F3 G3 R3 F2 G2 R2 F1 G1 R1 F0 G0 R0";

TEST(Stage3Plan, TheWindowBoundsTheLookAheadAndKeepsWhatItPassedGathered) {
  EngineConfig config;
  config.prefetch_elements = 4000;
  absl::StatusOr<Trace> run = Train(config, 3);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->steps[0], kOnDemand);
  // After F0 the window (4000) holds modules 1 and 2 (1280 + 1920); 3 would
  // pass it. Each Fetch moves the window on; 4 (3200) and 5 (3840) fit it
  // alone. At F5 the window reaches the backward use of 5, still gathered,
  // so R5 keeps it and the backward F5 gathers nothing. At F3 the window
  // takes 2, 1 and 0 (1920 + 1280 + 640).
  const std::string planned =
      "F0 G0 G1 G2 R0 F1 R1 F2 G3 R2 F3 G4 R3 F4 G5 R4 F5 R5 "
      "F5 G4 R5 F4 G3 R4 F3 G2 G1 G0 R3 F2 R2 F1 R1 F0 R0";
  EXPECT_EQ(run->steps[1], planned);
  EXPECT_EQ(run->steps[2], planned) << "every later step follows the same plan";
}

TEST(Stage3Plan, GathersStopAtTheLiveBudget) {
  EngineConfig config;
  config.prefetch_elements = 1'000'000;  // the window would take everything
  config.max_live_elements = 5000;
  absl::StatusOr<Trace> run = Train(config, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->steps[0], kOnDemand);
  // The prefetch stops at the first unit the budget has no room for (after
  // F0, module 3 would make 640 + 1280 + 1920 + 2560), and that module is
  // then gathered in line by its Fetch (F4, F5, F4 and F3 here). The window
  // passes the backward use of 5 while it is gathered: it is gathered once.
  EXPECT_EQ(run->steps[1],
            "F0 G0 G1 G2 R0 F1 R1 F2 G3 R2 F3 R3 F4 G4 R4 F5 G5 R5 "
            "F5 R5 F4 G4 R4 F3 G3 G2 R3 F2 G1 G0 R2 F1 R1 F0 R0");
  EXPECT_LE(run->peak_live, config.max_live_elements);
}

TEST(Stage3Plan, ReuseDistanceKeepsModulesNeededSoon) {
  EngineConfig config;
  config.prefetch_elements = 0;  // no prefetch: only the reuse distance keeps
  config.max_reuse_distance = 3;
  absl::StatusOr<Trace> run = Train(config, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  // Module m's uses are at positions m and 11 - m: within 3 fetches of the
  // release at m when 11 - 2m <= 3, i.e. for 4 and 5.
  EXPECT_EQ(run->steps[1],
            "F0 G0 R0 F1 G1 R1 F2 G2 R2 F3 G3 R3 F4 G4 R4 F5 G5 R5 "
            "F5 R5 F4 R4 F3 G3 R3 F2 G2 R2 F1 G1 R1 F0 G0 R0");
}

}  // namespace
}  // namespace zero
