// The engine's checkpoint face: what a rank owns, and rebuilding everything
// derived from it after a checkpoint overwrote it. A friend of Engine: it is
// the engine's own code, kept apart so that checkpoints see only this.
#include "zero/owned_state.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/internal/gradient_reducer.h"
#include "zero/internal/host_stepper.h"
#include "zero/internal/parameter_gatherer.h"
#include "zero/internal/rank_agreement.h"
#include "zero/internal/rank_context.h"

namespace zero {

OwnedStateAccess::Pieces OwnedStateAccess::pieces(int unit) {
  engine_.guard_.Await();  // the caller may write through them
  return engine_.states_->OwnedPieces(unit);
}

absl::Status OwnedStateAccess::Stream(int unit, Access access, StateFile::ChunkFn fn) {
  const RankContext& ctx = *engine_.ctx_;
  const bool known = unit >= 0 && unit < ctx.unit_count();
  return Stream(unit, 0, known ? ctx.unit(unit).shard : 0, access, fn);
}

absl::Status OwnedStateAccess::Stream(int unit, size_t begin, size_t count, Access access,
                                      StateFile::ChunkFn fn) {
  const RankContext& ctx = *engine_.ctx_;
  if (unit < 0 || unit >= ctx.unit_count() || begin + count > ctx.unit(unit).shard ||
      begin + count < begin) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no elements [%d, %d) in the owned piece of unit %d (%d units)", begin, begin + count,
        unit, ctx.unit_count()));
  }
  // offload_overlap's worker may be stepping this state (and owns the file's
  // staging) until Step.
  RETURN_IF_ERROR(Settled("reading or writing the owned state"));
  engine_.guard_.Await();
  return engine_.states_->StreamOwned(unit, begin, count, access, fn);
}

std::string OwnedStateAccess::nvme_file() const {
  const StateFile* file = engine_.states_->state_file();
  return file != nullptr ? file->path() : std::string();
}

void OwnedStateAccess::Guard(std::shared_future<void> read) {
  engine_.guard_.Guard(std::move(read));
}

absl::Status OwnedStateAccess::Settled(std::string_view what) const {
  return engine_.OwnedStateSettled(what);
}

ResumePoint OwnedStateAccess::resume_point() const {
  ResumePoint point{.steps = engine_.steps_, .loss_scaler = std::nullopt};
  if (engine_.scaler_) point.loss_scaler = engine_.scaler_->state();
  return point;
}

absl::Status OwnedStateAccess::Restore(const ResumePoint& point) {
  // checkpoint::Load agrees on the check itself; this one-call form must
  // too: a rank that refused alone left its peers in RestoreUnit's gathers
  // until the timeout. Refused alike on every rank, the group stays usable.
  const absl::Status check = CheckResumePoint(point);
  const uint64_t outcome = check.ok() ? 0 : 1 + static_cast<uint64_t>(check.code());
  if (absl::Status agreed = CheckAgreement(*engine_.ctx_, outcome, "whether the restore can begin");
      !agreed.ok()) {
    (void)engine_.Fail(agreed);
    return check.ok() ? agreed : check;  // a rank that refused says why
  }
  RETURN_IF_ERROR(check);
  RETURN_IF_ERROR(BeginRestore(point));
  for (int u = 0; u < engine_.ctx_->unit_count(); ++u) RETURN_IF_ERROR(RestoreUnit(u));
  return EndRestore();
}

absl::Status OwnedStateAccess::CheckResumePoint(const ResumePoint& point) const {
  if (restoring()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "BeginRestore while restoring (%d of %d units restored)", restore_next_,
        engine_.ctx_->unit_count()));
  }
  if (point.steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("restore to step %d", point.steps));
  }
  RETURN_IF_ERROR(Settled("a restore"));
  RETURN_IF_ERROR(engine_.gatherer_->NothingFetched("a restore"));  // Refresh drops gathered units
  // A bf16 or fp32 checkpoint into fp16 keeps the current scale.
  if (!point.loss_scaler || !engine_.scaler_) return absl::OkStatus();
  LossScaler trial = *engine_.scaler_;
  return trial.Restore(*point.loss_scaler);
}

absl::Status OwnedStateAccess::BeginRestore(const ResumePoint& point) {
  RETURN_IF_ERROR(CheckResumePoint(point));  // before anything changes
  engine_.guard_.Await();
  if (absl::Status s = engine_.AwaitComm(); !s.ok()) return engine_.Fail(s);
  if (point.loss_scaler && engine_.scaler_) {
    RETURN_IF_ERROR(engine_.scaler_->Restore(*point.loss_scaler));
  }
  engine_.reducer_->Clear();
  engine_.steps_ = point.steps;
  restore_next_ = 0;
  return absl::OkStatus();
}

absl::Status OwnedStateAccess::RestoreUnit(int unit) {
  const int units = engine_.ctx_->unit_count();
  std::string misuse;
  if (!restoring()) {
    misuse = absl::StrFormat("RestoreUnit(%d) outside BeginRestore .. EndRestore", unit);
  } else if (restore_next_ == units) {
    misuse = absl::StrFormat("RestoreUnit(%d) after all %d units were restored: call EndRestore",
                             unit, units);
  } else if (unit != restore_next_) {
    misuse = absl::StrFormat(
        "RestoreUnit(%d) where unit %d is next: every rank restores the units in order", unit,
        restore_next_);
  }
  if (!misuse.empty()) return engine_.Fail(absl::FailedPreconditionError(misuse));
  if (absl::Status s = RebuildUnit(unit); !s.ok()) return engine_.Fail(s);
  ++restore_next_;
  return absl::OkStatus();
}

absl::Status OwnedStateAccess::EndRestore() {
  const int units = engine_.ctx_->unit_count();
  if (restore_next_ != units) {
    return engine_.Fail(absl::FailedPreconditionError(
        absl::StrFormat("EndRestore after %d of %d units restored", restore_next_, units)));
  }
  restore_next_ = -1;
  absl::Status refreshed = engine_.gatherer_->Refresh();
  // The caller frees what its copies on the stream read once this returns.
  absl::Status synced = engine_.ctx_->stream->Synchronize();
  if (!refreshed.ok()) return engine_.Fail(refreshed);
  return synced;
}

// Stage 0 keeps master weights and state whole on every rank: gather the
// pieces. The model-dtype parameters are the master's rounding, made whole
// below stage 3.
absl::Status OwnedStateAccess::RebuildUnit(int unit) {
  const RankContext& ctx = *engine_.ctx_;
  ModelStates& states = *engine_.states_;
  const Unit& u = ctx.unit(unit);
  if (ctx.config.stage == 0) {
    float* master = ctx.master_apart ? states.master_data()
                                     : reinterpret_cast<float*>(states.params_at(0));
    RETURN_IF_ERROR(ctx.comm->AllGather(master + ctx.owned_offset(unit), master + u.offset,
                                        u.shard, DType::kF32, ctx.stream));
    for (Buffer& s : states.optimizer_state()) {
      RETURN_IF_ERROR(ctx.comm->AllGather(s.data<float>() + ctx.owned_offset(unit),
                                          s.data<float>() + u.offset, u.shard, DType::kF32,
                                          ctx.stream));
    }
    if (!ctx.master_apart) return absl::OkStatus();
  }
  if (ctx.master_apart && ctx.has_bytes && states.state_file() != nullptr) {
    // From the file through the host piece that steps publish from.
    char* host = states.CpuStepPiece(unit);
    RETURN_IF_ERROR(ctx.stream->Synchronize());  // the last publish may still read it
    RETURN_IF_ERROR(states.NarrowMaster(unit, host));
    if (host != states.ModelPiece(unit)) {
      RETURN_IF_ERROR(ctx.stream->Copy(states.ModelPiece(unit), host, u.shard * ctx.esize));
    }
  } else if (ctx.master_apart && ctx.has_bytes) {
    RETURN_IF_ERROR(ctx.elementwise->Narrow(states.ModelPiece(unit), states.MasterPiece(unit),
                                            u.shard, ctx.dtype, ctx.stream));
  }
  if (ctx.config.stage == 3) return absl::OkStatus();
  return ctx.comm->AllGather(states.ModelPiece(unit), states.WholeParams(unit), u.shard,
                             ctx.dtype, ctx.stream);
}

}  // namespace zero
