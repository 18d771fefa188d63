// ZeRO-Offload's step: the owned pieces' fp32 master weights, optimizer
// state and reduced gradients live in pinned host memory (or the NVMe state
// file, ZeRO-Infinity) and the optimizer steps on the CPU; only the
// model-dtype parameters go back to the device. With Offload::kParameters
// (stage 3) the parameter pieces stay on the host too and come up when a
// module is gathered. The CPU step is the same code the host devices run,
// so offloaded training equals device training bit for bit.
//
// With offload_overlap (and no clipping or loss scaling, whose scale needs
// every gradient first) the last micro-batch's units are stepped on a worker
// thread as their reductions finish, overlapping the rest of backward; Step
// then only waits for them. Until then the owned state is part old, part
// new: Settled says so to whoever would read it, write it or change the
// optimizer's settings. Driven by the engine's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "optimizers/optimizer.h"
#include "zero/internal/model_states.h"
#include "zero/internal/owned_state_guard.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/piece_update.h"
#include "zero/internal/rank_context.h"
#include "zero/internal/serial_worker.h"

namespace zero {

class HostStepper {
 public:
  // Everything passed outlives the stepper.
  HostStepper(const RankContext& ctx, ModelStates& states, ParameterGatherer& gatherer,
              Optimizer& optimizer, OwnedStateGuard& guard)
      : ctx_(ctx), states_(states), gatherer_(gatherer), optimizer_(optimizer), guard_(guard) {}
  ~HostStepper();  // waits for the worker's steps

  // After `unit`'s reduction was enqueued (GradientReducer::OnReduced) in
  // the step's last micro-batch: posts its CPU step, with the step number
  // and the mean scale Step will have, when offload_overlap applies.
  absl::Status OnUnitReduced(int unit, bool last_micro_batch, int64_t step, float mean_scale);
  // Step's update: steps what the overlap did not (the scale read from the
  // device when it lives there), then brings the parameters up.
  absl::Status Update(int64_t step, GradScale scale);
  // FailedPrecondition naming `what` from the first early step until
  // Update: the one flag for "the owned state may change now".
  absl::Status Settled(std::string_view what) const;
  int64_t early_updates() const { return early_updates_; }

 private:
  // The owned piece's CPU step with host buffers (any thread).
  absl::Status StepOnHost(int unit, int64_t step, float scale);
  // The same, one chunk at a time through the state file.
  absl::Status StepOnNvme(int unit, int64_t step, float scale);
  // Host -> device: the updated piece in the model dtype, made whole.
  absl::Status PublishUnit(int unit);

  const RankContext& ctx_;
  ModelStates& states_;
  ParameterGatherer& gatherer_;
  Optimizer& optimizer_;
  OwnedStateGuard& guard_;
  bool updated_early_ = false;  // this step's pieces are being stepped as reduced
  int64_t early_updates_ = 0;
  SerialWorker worker_;  // last: stops first
};

}  // namespace zero
