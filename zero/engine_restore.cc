// Checkpoint support: what a rank owns, and rebuilding everything derived
// from it after a checkpoint overwrote it.
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/precision.h"

namespace zero {

Engine::OwnedState Engine::owned_state(int unit) {
  OwnedState owned{.master = nullptr, .state = {}};
  if (!has_bytes()) {
    owned.state.assign(state_.size(), nullptr);
    return owned;
  }
  const Unit& u = layout_.units()[unit];
  owned.master = MasterPiece(unit);
  const size_t offset = config_.stage == 0 ? owned_offset(unit) : u.shard_offset;
  for (Buffer& s : state_) owned.state.push_back(s.data<float>() + offset);
  return owned;
}

Engine::ResumePoint Engine::resume_point() const {
  ResumePoint point{.steps = steps_, .loss_scaler = std::nullopt};
  if (scaler_) point.loss_scaler = scaler_->state();
  return point;
}

absl::Status Engine::Restore(const ResumePoint& point) {
  if (point.steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("restore to step %d", point.steps));
  }
  // Checked before anything changes; a bf16 or fp32 checkpoint into fp16
  // keeps the current scale.
  if (point.loss_scaler && scaler_) RETURN_IF_ERROR(scaler_->Restore(*point.loss_scaler));
  RETURN_IF_ERROR(ZeroGrad());
  for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
    if (absl::Status s = RestoreUnit(u); !s.ok()) return Fail(s);
  }
  steps_ = point.steps;
  if (config_.stage == 3) {
    if (absl::Status s = RefreshGathered(); !s.ok()) return Fail(s);
  }
  return stream_->Synchronize();
}

// Stage 0 keeps master weights and state whole on every rank: gather the
// pieces. The model-dtype parameters are the master's rounding, made whole
// below stage 3.
absl::Status Engine::RestoreUnit(int unit) {
  const Unit& u = layout_.units()[unit];
  if (config_.stage == 0) {
    float* master = master_apart_ ? master_.data<float>() : params_.data<float>();
    RETURN_IF_ERROR(comm_->AllGather(master + owned_offset(unit), master + u.offset, u.shard,
                                     DType::kF32, stream_));
    for (Buffer& s : state_) {
      RETURN_IF_ERROR(comm_->AllGather(s.data<float>() + owned_offset(unit),
                                       s.data<float>() + u.offset, u.shard, DType::kF32,
                                       stream_));
    }
    if (!master_apart_) return absl::OkStatus();
  }
  if (master_apart_) {
    RETURN_IF_ERROR(OnHost("restoring mixed-precision parameters", [&] {
      Narrow(MasterPiece(unit), ModelPiece(unit), dtype_, u.shard);
    }));
  }
  if (config_.stage == 3) return absl::OkStatus();
  return comm_->AllGather(ModelPiece(unit), At(params_, u.offset), u.shard, dtype_, stream_);
}

}  // namespace zero
