// The gradient side of the engine: staging what backward hands over,
// reducing each unit across ranks as soon as it is complete, and
// accumulating micro-batches in order.
#include "absl/strings/str_format.h"
#include "memory/status_macros.h"
#include "zero/engine.h"

namespace zero {

absl::Status Engine::AddGrad(int id, const void* grad, size_t numel, DType dtype) {
  const int count = static_cast<int>(layout_.params().size());
  if (id < 0 || id >= count) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: gradient for parameter #%d, but %d are registered", rank_, id, count)));
  }
  const ParamSlot& p = layout_.params()[id];
  if (dtype != config_.param_dtype || numel != p.numel || (grad == nullptr && has_bytes())) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: gradient of '%s' is %s x %d%s, the parameter is %s x %d", rank_, p.name,
        std::string(Name(dtype)), numel, grad == nullptr ? " (null)" : "",
        std::string(Name(config_.param_dtype)), p.numel)));
  }
  if (received_[id]) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: gradient of '%s' handed over twice in micro-batch %d", rank_, p.name,
        micro_batches_ + 1)));
  }
  if (micro_batches_ == config_.gradient_accumulation_steps) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: all %d micro-batches of step %d are complete: call Step before more "
        "gradients", rank_, micro_batches_, steps_ + 1)));
  }
  const Unit& u = layout_.units()[p.unit];
  absl::StatusOr<float*> staging = StagingFor(p.unit);
  if (!staging.ok()) return Fail(staging.status());
  if (has_bytes()) {
    // Synchronous: the caller's buffer may die when this returns.
    absl::Status s = stream_->Copy(*staging + (p.offset - u.offset), grad, numel * sizeof(float));
    if (s.ok()) s = stream_->Synchronize();
    if (!s.ok()) return Fail(s);
  }
  received_[id] = 1;
  ++units_[p.unit].received;
  return ReduceReadyUnits();
}

// Where unit `unit`'s gradients of this micro-batch are staged. Stages 0-1
// keep whole gradients, so the first micro-batch stages (and reduces) in
// place; otherwise the unit gets a buffer of its own until it is reduced.
absl::StatusOr<float*> Engine::StagingFor(int unit) {
  const Unit& u = layout_.units()[unit];
  UnitState& state = units_[unit];
  float* staging = nullptr;
  if (config_.stage == 1 || (config_.stage == 0 && micro_batches_ == 0)) {
    staging = grads_.data<float>() + u.offset;
  } else {
    if (!state.staging) {
      ASSIGN_OR_RETURN(state.staging, Buffer::Allocate(pool_, u.padded * sizeof(float),
                                                       Tag::kCommunication, stream_));
    }
    staging = state.staging.data<float>();
  }
  if (state.received == 0 && has_bytes() && u.padded > u.numel) {
    RETURN_IF_ERROR(stream_->Fill(staging + u.numel, 0, (u.padded - u.numel) * sizeof(float)));
  }
  return staging;
}

// Units reduce strictly from the last to the first, so every rank issues
// the same collectives in the same order whatever order gradients come in.
absl::Status Engine::ReduceReadyUnits() {
  while (next_unit_to_reduce_ >= 0) {
    const Unit& u = layout_.units()[next_unit_to_reduce_];
    if (units_[next_unit_to_reduce_].received < u.end_param - u.first_param) break;
    if (absl::Status s = ReduceUnit(next_unit_to_reduce_); !s.ok()) return Fail(s);
    --next_unit_to_reduce_;
  }
  if (next_unit_to_reduce_ < 0) {
    ++micro_batches_;
    ResetMicroBatch();
  }
  return absl::OkStatus();
}

absl::Status Engine::ReduceUnit(int unit) {
  const Unit& u = layout_.units()[unit];
  ASSIGN_OR_RETURN(float* staging, StagingFor(unit));
  const bool first = micro_batches_ == 0;
  if (config_.stage == 0) {
    RETURN_IF_ERROR(comm_->AllReduce(staging, staging, u.padded, DType::kF32, ReduceOp::kSum,
                                     stream_));
    if (!first) RETURN_IF_ERROR(Accumulate(grads_.data<float>() + u.offset, staging, u.padded));
  } else if (first) {
    // Lands in this rank's piece: of grads_ in place (stage 1 without
    // accumulation), else of owned_grads_.
    RETURN_IF_ERROR(comm_->ReduceScatter(staging, OwnedGrad(unit), u.shard, DType::kF32,
                                         ReduceOp::kSum, stream_));
  } else {
    ASSIGN_OR_RETURN(Buffer sum, Buffer::Allocate(pool_, u.shard * sizeof(float),
                                                  Tag::kCommunication, stream_));
    RETURN_IF_ERROR(comm_->ReduceScatter(staging, sum.data(), u.shard, DType::kF32,
                                         ReduceOp::kSum, stream_));
    RETURN_IF_ERROR(Accumulate(OwnedGrad(unit), sum.data<float>(), u.shard));
  }
  // Stage 2: the gradients this rank does not own are gone as soon as reduced.
  units_[unit].staging.Reset();
  return absl::OkStatus();
}

// The reduced gradients the optimizer reads for `unit`.
float* Engine::OwnedGrad(int unit) {
  const Unit& u = layout_.units()[unit];
  if (config_.stage == 0) return grads_.data<float>() + u.offset;
  if (!owned_grads_) return grads_.data<float>() + owned_offset(unit);
  return owned_grads_.data<float>() + u.shard_offset;
}

absl::Status Engine::Accumulate(float* into, const float* from, size_t count) {
  if (!has_bytes()) return absl::OkStatus();
  if (devices_->kind() == DeviceKind::kCuda) {
    return absl::UnimplementedError("gradient accumulation on cards is not implemented yet");
  }
  RETURN_IF_ERROR(stream_->Synchronize());
  for (size_t i = 0; i < count; ++i) into[i] += from[i];
  return absl::OkStatus();
}

void Engine::ResetMicroBatch() {
  for (UnitState& u : units_) {
    u.received = 0;
    u.staging.Reset();
  }
  std::fill(received_.begin(), received_.end(), uint8_t{0});
  next_unit_to_reduce_ = static_cast<int>(units_.size()) - 1;
}

}  // namespace zero
