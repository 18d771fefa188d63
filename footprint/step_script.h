// One training step of the footprint experiment, written out once as a
// list of operations that StepRunner (step_runner.h) plays on the engine
// and the pool: forward fetches and releases in the model's forward order,
// each site's activations allocated as forward creates them and freed as
// backward consumes them (activations.h); backward in reverse, with each
// module's gradients handed over at its last backward use; recomputation
// where checkpointing asks for it (full: at a layer's first backward use the
// layer's forward runs again, fetching its attention module once more;
// selective: eager attention's softmax and dropout at the attention's
// backward). Marks say where layers and phases begin. A plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "footprint/activations.h"
#include "footprint/model.h"

namespace zero::footprint {

struct StepOp {
  enum class Kind {
    kFetch,    // arg: module
    kRelease,  // arg: module
    kGrads,    // arg: module: hand over its gradients
    kAlloc,    // arg: slot (StepScript::slot_bytes), an activation tensor
    kFree,     // arg: slot
    kMark,     // arg: a Mark
  };
  Kind kind;
  int arg;
};

// Marks: kLayer + k before layer k's activations (kLayer + layers: before
// the head's); the phases.
enum Mark : int { kBackward = -1, kOptimizer = -2, kLayer = 0 };

struct StepScript {
  std::vector<StepOp> ops;             // ends with Mark kOptimizer; Step follows
  std::vector<uint64_t> slot_bytes;    // an allocation per slot per step
  int layers = 0;                      // layer marks: 0 .. layers (the head)
};

// Without `activations` (or for a model without a transformer shape) the
// step has no activations and no layer marks. InvalidArgument when an
// activation would not fit the simulated device.
absl::StatusOr<StepScript> BuildStepScript(const ModelSpec& model,
                                           const std::optional<ActivationOptions>& activations);

}  // namespace zero::footprint
