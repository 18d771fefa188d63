// The optimizer step: clipping and loss-scale checks over all ranks, the
// update of each rank's owned pieces, and making parameters whole again.
#include <cmath>
#include <vector>

#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/grad_norm.h"
#include "zero/internal/gradient_reducer.h"
#include "zero/internal/host_stepper.h"
#include "zero/internal/model_states.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/piece_update.h"
#include "zero/internal/rank_context.h"

namespace zero {

absl::Status Engine::Step() {
  RETURN_IF_ERROR(NotRestoring("Step"));
  absl::Status stepped = StepOnce();
  ops_.StepDone();
  return stepped;
}

absl::Status Engine::StepOnce() {
  // Before anything is updated: the peers are in this step's collectives.
  if (absl::Status s = gatherer_->NothingFetched("Step"); !s.ok()) return Fail(s);
  if (absl::Status ready = reducer_->ReadyForStep(); !ready.ok()) return Fail(ready);
  // The reductions ran on the communication stream.
  if (absl::Status s = AwaitComm(); !s.ok()) return Fail(s);
  // One that failed after its call returned (NCCL, a host stream's callback)
  // must not feed an update; the update's own check covers what fails later.
  if (absl::Status s = ctx_->whole->AsyncError(); !s.ok()) return Fail(s);
  GradScale grad_scale{MeanGradScale()};
  if (ctx_->config.max_grad_norm > 0 || scaler_) {
    absl::StatusOr<GradScale> clipped = norm_->Compute(*states_, grad_scale.value);
    if (!clipped.ok()) return Fail(clipped.status());
    grad_scale = *clipped;
    norm_on_device_ = !scaler_;
  }
  if (scaler_) {
    // The step's one host wait: whether to skip is the host's decision.
    absl::StatusOr<double> norm = norm_->Read();
    if (!norm.ok()) return Fail(norm.status());
    // Every rank sees the same norm, so all skip (and back off) together,
    // or all stop together at the minimum scale (the gradients go).
    const bool overflow = !std::isfinite(*norm);
    if (absl::Status stuck = scaler_->CheckProgress(overflow); !stuck.ok()) {
      (void)SkipStep();
      return stuck;
    }
    if (scaler_->Update(overflow)) return SkipStep();
    last_grad_norm_ = *norm;
  }
  // Only now, so that a snapshot still copying overlaps the checks above.
  guard_.Await();
  ++steps_;
  if (host_ != nullptr) {
    if (absl::Status s = host_->Update(steps_, grad_scale); !s.ok()) return Fail(s);
  }
  for (int u = 0; u < ctx_->unit_count() && host_ == nullptr; ++u) {
    if (absl::Status s = UpdateUnit(u, grad_scale); !s.ok()) return Fail(s);
  }
  reducer_->Clear();
  if (absl::Status s = gatherer_->FinishStep(); !s.ok()) return Fail(s);
  // A collective that failed on a stream after its call returned OK.
  return ctx_->whole->AsyncError();
}

// An fp16 step whose gradients overflowed somewhere: parameters, state and
// the step count stay as they were; the gradients go.
absl::Status Engine::SkipStep() {
  ++skipped_steps_;
  reducer_->Clear();
  return FailIfError(gatherer_->FinishStep());
}

float Engine::MeanGradScale() const {
  // In double: world x accumulation overflowed an int (a scale of 1/0).
  const double micro_batches =
      ctx_->config.average_micro_batches ? double(ctx_->config.gradient_accumulation_steps) : 1.0;
  const int replicas = ctx_->replicas != nullptr ? ctx_->replicas->world_size() : 1;
  const double terms = double(ctx_->layout.world_size()) * replicas * micro_batches;
  if (scaler_) return static_cast<float>(1.0 / (terms * scaler_->scale()));
  return 1.0f / static_cast<float>(terms);
}

// Mixed precision updates the fp32 master and writes the model-dtype copy
// in the same pass.
absl::Status Engine::UpdateUnit(int unit, GradScale grad_scale) {
  const Unit& u = ctx_->unit(unit);
  const bool whole = ctx_->config.stage == 0;
  const size_t count = whole ? u.padded : u.shard;
  char* params = whole ? states_->WholeParams(unit) : states_->ModelPiece(unit);
  float* master = ctx_->mixed ? states_->master_data() + states_->StateOffset(unit)
                              : reinterpret_cast<float*>(params);
  const std::vector<std::span<float>> state = states_->StateAt(states_->StateOffset(unit), count);
  // Ordered on the stream after the reductions, on whatever device it is:
  // the host does not wait.
  RETURN_IF_ERROR(UpdateOnStream(*ctx_, *optimizer_,
                                 {.master = {master, count},
                                  .first_element = whole ? u.offset : ctx_->owned_offset(unit),
                                  .state = state,
                                  .grads = states_->OwnedGrads(unit),
                                  .copy = ctx_->mixed ? params : nullptr,
                                  .step = steps_,
                                  .scale = grad_scale}));
  // Stage 3 keeps its pieces; they are gathered when next fetched.
  if (whole || ctx_->config.stage == 3) return absl::OkStatus();
  return gatherer_->Publish(unit);
}

}  // namespace zero
