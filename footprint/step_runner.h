// Plays a StepScript (step_script.h) on one rank's engine and device pool:
// fetches, releases and gradient hand-overs go to the engine (null gradient
// data: the experiment runs on meta devices), activations are allocated
// from the pool under the activations tag, so the pool's peak holds them
// with the model states and its fragmentation. One thread; the runner
// borrows everything it is given.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "footprint/model.h"
#include "footprint/step_script.h"
#include "memory/resource.h"
#include "zero/engine.h"

namespace zero::footprint {

class StepRunner {
 public:
  StepRunner(const StepScript& script, const ModelSpec& model, DType dtype, Engine& engine,
             MemoryResource& pool);

  // The script, then Engine::Step. `on_mark` (may be empty) sees each mark
  // as it is reached. Every activation is freed by the end of the script.
  absl::Status Step(const std::function<void(int mark)>& on_mark = {});

 private:
  absl::Status HandOver(int module);

  const StepScript& script_;
  const ModelSpec& model_;
  const DType dtype_;
  Engine& engine_;
  MemoryResource& pool_;
  std::vector<int> first_param_;  // per module: its first parameter's id
  std::vector<void*> slots_;      // per slot: the live allocation
};

}  // namespace zero::footprint
