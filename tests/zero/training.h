// Drives the test models under the engine, one thread per rank over host or
// meta devices, and the plain single-process reference the engine must match.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "optimizers/optimizer.h"
#include "tests/model/model.h"
#include "zero/engine.h"

namespace zero::testing_model {

using OptimizerFactory = std::function<absl::StatusOr<std::unique_ptr<Optimizer>>()>;

struct TrainingRun {
  int world = 1;
  int steps = 20;
  EngineConfig config;
  DeviceSpec::Kind kind = DeviceSpec::Kind::kHost;
  // Host and meta devices to make; 0: one per rank. Fewer are shared by the
  // ranks round-robin, as ranks share one card (cards: every visible one).
  int devices = 0;
  size_t capacity = size_t{256} << 20;
  uint64_t seed = 1234;
  // The local backend's NCCL-like mode: collectives return once enqueued on
  // the engine's streams (LocalGroupOptions::stream_ordered).
  bool stream_ordered = false;
  // The local backend's stream path (LocalGroupOptions::move_on_streams):
  // collectives move their bytes as work on the engine's streams, as on a
  // card. Synchronous mode only.
  bool move_on_streams = false;
  // Ranks per node of the local group (LocalGroupOptions::ranks_per_node;
  // 0: one node) and whether its collectives are hierarchical there. The
  // reference sums ranks in the same order (node by node, then the nodes).
  int ranks_per_node = 0;
  bool hierarchical = true;
  // Host streams' delay mode; off: $ZERO_HOST_STREAM_DELAY decides.
  HostStreamOptions host_streams;
  // Changes one rank's config before its engine is made (ranks that disagree).
  std::function<void(int rank, EngineConfig& config)> config_for_rank;
  // Called on each rank after Create, before training; may change what a
  // rank does to provoke errors. Returning an error ends that rank's run.
  std::function<absl::Status(int rank, Engine& engine)> before_training;
  // Called on each fp32 gradient before it is scaled by the loss scale and
  // handed over in the model dtype (e.g. to provoke an overflow).
  std::function<void(int rank, int step, int param, std::span<float> grad)> edit_grad;
};

struct RankResult {
  absl::Status status;
  ParamSet params;      // final parameters as this rank sees them (widened to fp32)
  std::vector<float> losses;  // per step: the mean over this rank's micro-batches
  EngineStats stats;    // after the last step
  size_t peak_gradients = 0, peak_communication = 0;
};

// The batch of `rank` for micro-batch `micro` of step `step`.
uint64_t BatchSeed(uint64_t seed, int rank, int step, int micro);

// Runs `run` and returns each rank's outcome (errors included).
std::vector<RankResult> TrainWithEngine(const Model& model, const TrainingRun& run,
                                        const OptimizerFactory& make_optimizer);

// What TrainWithEngine runs on each rank, for drivers that keep their
// engines between calls (checkpoint tests): steps [first_step, run.steps)
// on the batches BatchSeed gives, each step's mean loss appended to losses.
absl::Status TrainSteps(const Model& model, const TrainingRun& run, Engine& engine, int rank,
                        int first_step, std::vector<float>& losses);
absl::Status SetInitialParams(const Model& model, uint64_t seed, Engine& engine);
// Collective: the parameters as this rank sees them, widened to fp32,
// module by module (Fetch/Release) as stage 3 needs.
absl::StatusOr<ParamSet> ReadParams(const Model& model, Engine& engine);

// into += from, element by element; when `first`, into = from (0 + x is
// not always x: -0.0), as the engine's rank-order reductions start.
void AddOrTake(ParamSet& into, ParamSet from, bool first);

// One process, no engine: each micro-batch's gradients summed over ranks in
// rank order, micro-batches accumulated in order, then the optimizer with
// grad_scale 1/(world * micro-batches), parameter by parameter.
absl::StatusOr<ParamSet> TrainReference(const Model& model, const TrainingRun& run,
                                        const OptimizerFactory& make_optimizer);

std::vector<ParamSpec> SpecsOf(const Model& model);

}  // namespace zero::testing_model
