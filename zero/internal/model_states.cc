#include "zero/internal/model_states.h"

#include <utility>

#include "base/status_macros.h"

namespace zero {

absl::StatusOr<std::unique_ptr<ModelStates>> ModelStates::Allocate(const RankContext& ctx,
                                                                   const Placement& placement,
                                                                   MemoryResource* host) {
  std::unique_ptr<ModelStates> states(new ModelStates(ctx));
  if (placement.bytes(Home::kHost) > 0 && host == nullptr) {
    return absl::InternalError("model states placed on the host, but no host memory is given");
  }
  states->state_.resize(placement[State::kOptimizer].count);
  const std::pair<State, Buffer*> buffers[] = {
      {State::kParams, &states->params_},           {State::kMaster, &states->master_},
      {State::kHostParams, &states->host_params_}, {State::kGrads, &states->grads_},
      {State::kOwnedGrads, &states->owned_grads_}};
  auto place = [&](const Placed& p, Buffer& b) {
    return states->AllocateZeroed(b, p.home == Home::kHost ? host : ctx.pool, p);
  };
  for (const auto& [state, buffer] : buffers) {
    if (placement[state].home != Home::kNone) RETURN_IF_ERROR(place(placement[state], *buffer));
  }
  for (Buffer& s : states->state_) RETURN_IF_ERROR(place(placement[State::kOptimizer], s));
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  return states;
}

absl::Status ModelStates::AllocateZeroed(Buffer& b, MemoryResource* from, const Placed& placed) {
  ASSIGN_OR_RETURN(b, Buffer::Allocate(from, placed.bytes, placed.tag, ctx_.stream));
  return ctx_.has_bytes ? ctx_.stream->Fill(b.data(), 0, placed.bytes) : absl::OkStatus();
}

char* ModelStates::WholeParams(int unit) const {
  if (ctx_.config.stage == 3) return nullptr;
  return ctx_.At(params_, ctx_.unit(unit).offset);
}

char* ModelStates::ModelPiece(int unit) const {
  const Unit& u = ctx_.unit(unit);
  return ctx_.At(params_, ctx_.config.stage == 3 ? u.shard_offset : ctx_.owned_offset(unit));
}

float* ModelStates::MasterPiece(int unit) const {
  if (ctx_.master_apart) return master_.data<float>() + OwnedStateOffset(unit);
  return reinterpret_cast<float*>(ModelPiece(unit));
}

char* ModelStates::HostModelPiece(int unit) const {
  return ctx_.At(host_params_, ctx_.unit(unit).shard_offset);
}

char* ModelStates::WholeGrads(int unit) const {
  return ctx_.At(grads_, ctx_.unit(unit).offset);
}

char* ModelStates::OwnedGrads(int unit) const {
  if (ctx_.config.stage == 0) return WholeGrads(unit);
  if (!owned_grads_) return ctx_.At(grads_, ctx_.owned_offset(unit));
  return ctx_.At(owned_grads_, ctx_.unit(unit).shard_offset);
}

char* ModelStates::OwnedGradPiece(int unit) const {
  if (ctx_.config.stage == 0) return ctx_.At(grads_, ctx_.owned_offset(unit));
  return OwnedGrads(unit);
}

size_t ModelStates::StateOffset(int unit) const {
  return ctx_.config.stage == 0 ? ctx_.unit(unit).offset : ctx_.unit(unit).shard_offset;
}

size_t ModelStates::OwnedStateOffset(int unit) const {
  return ctx_.config.stage == 0 ? ctx_.owned_offset(unit) : ctx_.unit(unit).shard_offset;
}

}  // namespace zero
