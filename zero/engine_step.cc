// The optimizer step: clipping and loss-scale checks over all ranks, the
// update of each rank's owned pieces, and making parameters whole again.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "zero/engine.h"

namespace zero {

absl::Status Engine::Step() {
  const int gas = config_.gradient_accumulation_steps;
  const int partial = static_cast<int>(
      std::count(received_.begin(), received_.end(), uint8_t{1}));
  if (micro_batches_ != gas || partial > 0) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < received_.size() && missing.size() < 5; ++i) {
      if (!received_[i]) missing.push_back("'" + layout_.params()[i].name + "'");
    }
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: Step before every gradient arrived: %d of %d micro-batches complete%s",
        rank_, micro_batches_, gas,
        partial > 0 ? absl::StrFormat(", micro-batch %d still lacks %s", micro_batches_ + 1,
                                      absl::StrJoin(missing, ", "))
                    : std::string())));
  }
  float grad_scale = MeanGradScale();
  if (config_.max_grad_norm > 0 || scaler_) {
    absl::StatusOr<double> norm = GlobalGradNorm(grad_scale);
    if (!norm.ok()) return Fail(norm.status());
    // Every rank sees the same norm, so all skip (and back off) together.
    if (scaler_ && scaler_->Update(!std::isfinite(*norm))) return SkipStep();
    last_grad_norm_ = *norm;
    const double coef = config_.max_grad_norm / (*norm + 1e-6);  // torch's clip_grad_norm_
    if (config_.max_grad_norm > 0 && coef < 1.0) grad_scale = static_cast<float>(grad_scale * coef);
  }
  ++steps_;
  if (offload()) {
    if (absl::Status s = UpdateOffloaded(grad_scale); !s.ok()) return Fail(s);
  }
  for (int u = 0; u < static_cast<int>(layout_.units().size()) && !offload(); ++u) {
    if (absl::Status s = UpdateUnit(u, grad_scale); !s.ok()) return Fail(s);
  }
  micro_batches_ = 0;
  if (config_.stage == 3) {
    if (absl::Status s = FinishStepStage3(); !s.ok()) return Fail(s);
  }
  return absl::OkStatus();
}

// An fp16 step whose gradients overflowed somewhere: parameters, state and
// the step count stay as they were; the gradients go.
absl::Status Engine::SkipStep() {
  ++skipped_steps_;
  micro_batches_ = 0;
  ResetMicroBatch();
  if (config_.stage == 3) {
    if (absl::Status s = FinishStepStage3(); !s.ok()) return Fail(s);
  }
  return absl::OkStatus();
}

absl::Status Engine::RunOptimizer(int unit, std::span<float> master, size_t state_offset,
                                  void* copy, int64_t step, float grad_scale, bool on_card) {
  std::vector<std::span<float>> state;
  for (Buffer& s : state_) state.emplace_back(s.data<float>() + state_offset, master.size());
  StepArgs args{.params = master,
                .grads = OwnedGrad(unit),
                .grad_dtype = dtype_,
                .state = state,
                .step = step,
                .grad_scale = grad_scale,
                .param_copy = copy,
                .copy_dtype = mixed_ ? dtype_ : DType::kBF16};
  if (on_card) return optimizer_->StepCuda(args, stream_->native_handle());
  return optimizer_->Step(args);
}

float Engine::MeanGradScale() const {
  const int terms = layout_.world_size() * config_.gradient_accumulation_steps;
  if (scaler_) return static_cast<float>(1.0 / (double(terms) * scaler_->scale()));
  return 1.0f / static_cast<float>(terms);
}

float* Engine::MasterPiece(int unit) {
  const Unit& u = layout_.units()[unit];
  const int stage = config_.stage;
  if (master_apart_) {
    return master_.data<float>() + (stage == 0 ? owned_offset(unit) : u.shard_offset);
  }
  return params_.data<float>() + (stage == 3 ? u.shard_offset : owned_offset(unit));
}

char* Engine::ModelPiece(int unit) {
  const Unit& u = layout_.units()[unit];
  return At(params_, config_.stage == 3 ? u.shard_offset : owned_offset(unit));
}

// Updates the parameters a rank owns in `unit` (stage 0: all of it), then
// (stages 1-2) gathers every rank's updated piece so each holds the whole
// unit again. Mixed precision updates the fp32 master and writes the model-
// dtype copy in the same pass.
absl::Status Engine::UpdateUnit(int unit, float grad_scale) {
  const Unit& u = layout_.units()[unit];
  const bool whole = config_.stage == 0;
  const size_t count = whole ? u.padded : u.shard;
  const size_t state_offset = whole ? u.offset : u.shard_offset;
  char* params = whole ? At(params_, u.offset) : ModelPiece(unit);
  float* master = mixed_ ? master_.data<float>() + state_offset : reinterpret_cast<float*>(params);
  if (has_bytes()) {
    const bool on_card = devices_->kind() == DeviceKind::kCuda;
    if (!on_card) RETURN_IF_ERROR(stream_->Synchronize());
    RETURN_IF_ERROR(RunOptimizer(unit, {master, count}, state_offset, mixed_ ? params : nullptr,
                                 steps_, grad_scale, on_card));
  }
  // Stage 3 keeps its pieces; they are gathered when next fetched.
  if (whole || config_.stage == 3) return absl::OkStatus();
  return comm_->AllGather(params, At(params_, u.offset), u.shard, dtype_, stream_);
}

}  // namespace zero
