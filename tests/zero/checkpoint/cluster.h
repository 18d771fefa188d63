// A group of ranks (threads over host devices) whose engines live across
// calls, so a test can train, save, load and train on with the same
// engines, and read back both the parameters and the owned model states.
// Plus the single-process reference that continues from given states.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "tests/zero/training.h"
#include "zero/checkpoint/checkpoint.h"
#include "zero/comm/communicator.h"
#include "zero/engine.h"

namespace zero::testing_model {

// [0]: fp32 master weights, [1 + i]: optimizer state i; one vector per parameter.
using ModelStates = std::vector<ParamSet>;

class Cluster {
 public:
  // Creates run.world engines of `model` (which must outlive the cluster)
  // with run.config, set to InitialParams(run.seed). run.steps is unused:
  // Train says which steps.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const Model& model, const TrainingRun& run,
                                                         const OptimizerFactory& optimizer);
  ~Cluster();

  int world() const { return run_.world; }
  Engine& engine(int rank) { return *engines_[rank]; }
  checkpoint::Participant participant(int rank);

  // fn(rank) on one thread per rank, all at once; each rank's status.
  std::vector<absl::Status> Run(const std::function<absl::Status(int rank)>& fn);
  // Steps [from, to) of the run's data (the same batches as TrainWithEngine).
  absl::Status Train(int from, int to);
  // Every rank's result (they must agree: a checkpoint error reaches all).
  std::vector<absl::Status> Save(const std::string& root,
                                 const checkpoint::SaveOptions& options = {});
  std::vector<absl::Status> Load(const std::string& path);

  // The parameters as each rank sees them.
  absl::StatusOr<std::vector<ParamSet>> Params();
  // The model states put together from every rank's owned pieces.
  absl::StatusOr<ModelStates> States();

 private:
  Cluster(const Model& model, const TrainingRun& run) : model_(model), run_(run) {}
  absl::Status CopyOwnedPieces(int rank, ModelStates& into);

  const Model& model_;
  const TrainingRun run_;
  std::unique_ptr<DeviceSystem> devices_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::unique_ptr<Engine>> engines_;  // destroyed first
};

// OK when every status is; else the first error, naming its rank.
absl::Status AllOk(const std::vector<absl::Status>& statuses);

// One process, no engine, fp32 without clipping: continues from `states`
// at step `from` through step `to` - 1 exactly as `world` ranks with
// `gas` micro-batches each would (TrainReference's arithmetic).
absl::StatusOr<ModelStates> ReferenceFrom(const Model& model, ModelStates states, int from, int to,
                                          int world, int gas, uint64_t seed,
                                          const OptimizerFactory& make_optimizer);

// A new empty folder under $TEST_TMPDIR.
std::string FreshDir(const std::string& name);

}  // namespace zero::testing_model
