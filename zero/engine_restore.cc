// Checkpoint support: what a rank owns, and rebuilding everything derived
// from it after a checkpoint overwrote it.
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/gradient_reducer.h"
#include "zero/internal/model_states.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/rank_agreement.h"
#include "zero/internal/rank_context.h"
#include "zero/precision.h"

namespace zero {

Engine::OwnedState Engine::owned_state(int unit) {
  AwaitOwnedStateReader();  // the caller may write through it
  OwnedState owned{.master = nullptr, .state = {}};
  if (unit < 0 || unit >= ctx_->unit_count()) return owned;  // no such unit: nothing
  std::vector<Buffer>& state = states_->optimizer_state();
  if (state_file_ != nullptr) {  // in the file: StreamOwnedState
    owned.state.assign(optimizer_->state_buffers(), nullptr);
    return owned;
  }
  if (!ctx_->has_bytes) {
    owned.state.assign(state.size(), nullptr);
    return owned;
  }
  owned.master = states_->MasterPiece(unit);
  const size_t offset = states_->OwnedStateOffset(unit);
  for (Buffer& s : state) owned.state.push_back(s.data<float>() + offset);
  return owned;
}

Engine::ResumePoint Engine::resume_point() const {
  ResumePoint point{.steps = steps_, .loss_scaler = std::nullopt};
  if (scaler_) point.loss_scaler = scaler_->state();
  return point;
}

absl::Status Engine::Restore(const ResumePoint& point) {
  // checkpoint::Load agrees on the check itself; this one-call form must
  // too: a rank that refused alone left its peers in RestoreUnit's gathers
  // until the timeout. Refused alike on every rank, the group stays usable.
  const absl::Status check = CheckResumePoint(point);
  const uint64_t outcome = check.ok() ? 0 : 1 + static_cast<uint64_t>(check.code());
  if (absl::Status agreed = CheckAgreement(*ctx_, outcome, "whether the restore can begin");
      !agreed.ok()) {
    (void)Fail(agreed);
    return check.ok() ? agreed : check;  // a rank that refused says why
  }
  RETURN_IF_ERROR(check);
  RETURN_IF_ERROR(BeginRestore(point));
  for (int u = 0; u < ctx_->unit_count(); ++u) RETURN_IF_ERROR(RestoreUnit(u));
  return EndRestore();
}

absl::Status Engine::CheckResumePoint(const ResumePoint& point) const {
  if (restore_next_ >= 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "BeginRestore while restoring (%d of %d units restored)", restore_next_,
        ctx_->unit_count()));
  }
  if (point.steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("restore to step %d", point.steps));
  }
  RETURN_IF_ERROR(NotUpdatedEarly());
  RETURN_IF_ERROR(gatherer_->NothingFetched("a restore"));  // Refresh drops gathered units
  // A bf16 or fp32 checkpoint into fp16 keeps the current scale.
  if (!point.loss_scaler || !scaler_) return absl::OkStatus();
  LossScaler trial = *scaler_;
  return trial.Restore(*point.loss_scaler);
}

absl::Status Engine::BeginRestore(const ResumePoint& point) {
  RETURN_IF_ERROR(CheckResumePoint(point));  // before anything changes
  AwaitOwnedStateReader();
  if (absl::Status s = AwaitComm(); !s.ok()) return Fail(s);
  if (point.loss_scaler && scaler_) RETURN_IF_ERROR(scaler_->Restore(*point.loss_scaler));
  reducer_->Clear();
  steps_ = point.steps;
  restore_next_ = 0;
  return absl::OkStatus();
}

absl::Status Engine::RestoreUnit(int unit) {
  if (restore_next_ < 0) {
    return Fail(absl::FailedPreconditionError(
        absl::StrFormat("RestoreUnit(%d) outside BeginRestore .. EndRestore", unit)));
  }
  if (restore_next_ == ctx_->unit_count()) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "RestoreUnit(%d) after all %d units were restored: call EndRestore", unit,
        ctx_->unit_count())));
  }
  if (unit != restore_next_) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "RestoreUnit(%d) where unit %d is next: every rank restores the units in order", unit,
        restore_next_)));
  }
  if (absl::Status s = RebuildUnit(unit); !s.ok()) return Fail(s);
  ++restore_next_;
  return absl::OkStatus();
}

absl::Status Engine::EndRestore() {
  if (restore_next_ != ctx_->unit_count()) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "EndRestore after %d of %d units restored", restore_next_, ctx_->unit_count())));
  }
  restore_next_ = -1;
  absl::Status refreshed = gatherer_->Refresh();
  // The caller frees what its copies on the stream read once this returns.
  absl::Status synced = ctx_->stream->Synchronize();
  if (!refreshed.ok()) return Fail(refreshed);
  return synced;
}

// Stage 0 keeps master weights and state whole on every rank: gather the
// pieces. The model-dtype parameters are the master's rounding, made whole
// below stage 3.
absl::Status Engine::RebuildUnit(int unit) {
  const RankContext& ctx = *ctx_;
  const Unit& u = ctx.unit(unit);
  if (ctx.config.stage == 0) {
    float* master = ctx.master_apart ? states_->master_data()
                                     : reinterpret_cast<float*>(states_->params_at(0));
    RETURN_IF_ERROR(ctx.comm->AllGather(master + ctx.owned_offset(unit), master + u.offset,
                                        u.shard, DType::kF32, ctx.stream));
    for (Buffer& s : states_->optimizer_state()) {
      RETURN_IF_ERROR(ctx.comm->AllGather(s.data<float>() + ctx.owned_offset(unit),
                                          s.data<float>() + u.offset, u.shard, DType::kF32,
                                          ctx.stream));
    }
    if (!ctx.master_apart) return absl::OkStatus();
  }
  if (ctx.master_apart && ctx.has_bytes && state_file_ != nullptr) {
    // From the file through the host piece that steps publish from.
    char* host = UpdatedPiece(unit);
    RETURN_IF_ERROR(ctx.stream->Synchronize());  // the last publish may still read it
    RETURN_IF_ERROR(NarrowMaster(unit, host));
    if (host != states_->ModelPiece(unit)) {
      RETURN_IF_ERROR(ctx.stream->Copy(states_->ModelPiece(unit), host, u.shard * ctx.esize));
    }
  } else if (ctx.master_apart && ctx.has_bytes) {
    RETURN_IF_ERROR(ctx.elementwise->Narrow(states_->ModelPiece(unit), states_->MasterPiece(unit),
                                            u.shard, ctx.dtype, ctx.stream));
  }
  if (ctx.config.stage == 3) return absl::OkStatus();
  return ctx.comm->AllGather(states_->ModelPiece(unit), states_->WholeParams(unit), u.shard,
                             ctx.dtype, ctx.stream);
}

}  // namespace zero
