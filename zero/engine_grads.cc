// The gradient side of the engine: staging what backward hands over,
// reducing each unit across ranks as soon as it is complete, and
// accumulating micro-batches in order.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"
#include "zero/precision.h"

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
  absl::StatusOr<char*> staging = StagingFor(p.unit);
  if (!staging.ok()) return Fail(staging.status());
  if (has_bytes()) {
    // Synchronous: the caller's buffer may die when this returns.
    absl::Status s = stream_->Copy(*staging + (p.offset - u.offset) * esize_, grad, numel * esize_);
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
absl::StatusOr<char*> Engine::StagingFor(int unit) {
  const Unit& u = layout_.units()[unit];
  UnitState& state = units_[unit];
  char* staging = nullptr;
  if (config_.stage == 1 || (config_.stage == 0 && micro_batches_ == 0)) {
    staging = At(grads_, u.offset);
  } else {
    if (!state.staging) {
      ASSIGN_OR_RETURN(state.staging, Buffer::Allocate(pool_, u.padded * esize_,
                                                       Tag::kCommunication, stream_));
    }
    staging = state.staging.data<char>();
  }
  if (state.received == 0 && has_bytes() && u.padded > u.numel) {
    RETURN_IF_ERROR(stream_->Fill(staging + u.numel * esize_, 0, (u.padded - u.numel) * esize_));
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
    if (UpdatesEarly()) {
      // The optimizer's grad_scale and step as Step will have them (no
      // clipping or loss scale when updating early).
      const int unit = next_unit_to_reduce_;
      const float scale = MeanGradScale();
      const int64_t step = steps_ + 1;
      worker_->Post([this, unit, step, scale] { return StepOnHost(unit, step, scale); });
      updated_early_ = true;
      ++early_unit_updates_;
    }
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
  ASSIGN_OR_RETURN(char* staging, StagingFor(unit));
  const bool first = micro_batches_ == 0;
  if (mixed_) {
    RETURN_IF_ERROR(ReduceWidened(unit, staging, first));
  } else if (config_.stage == 0) {
    float* sum = reinterpret_cast<float*>(staging);
    RETURN_IF_ERROR(comm_->AllReduce(sum, sum, u.padded, DType::kF32, ReduceOp::kSum, stream_));
    if (!first) RETURN_IF_ERROR(Store(At(grads_, u.offset), sum, u.padded, first));
  } else if (first && !offload()) {
    // Lands in this rank's piece: of grads_ in place (stage 1 without
    // accumulation), else of owned_grads_.
    RETURN_IF_ERROR(comm_->ReduceScatter(staging, OwnedGrad(unit), u.shard, DType::kF32,
                                         ReduceOp::kSum, stream_));
  } else {
    ASSIGN_OR_RETURN(Buffer piece, Buffer::Allocate(pool_, u.shard * sizeof(float),
                                                    Tag::kCommunication, stream_));
    RETURN_IF_ERROR(comm_->ReduceScatter(staging, piece.data(), u.shard, DType::kF32,
                                         ReduceOp::kSum, stream_));
    RETURN_IF_ERROR(Store(OwnedGrad(unit), piece.data<float>(), u.shard, first));
  }
  // Stage 2: the gradients this rank does not own are gone as soon as reduced.
  units_[unit].staging.Reset();
  return absl::OkStatus();
}

// bf16/fp16 gradients are summed in fp32 and the sum rounded once into the
// (accumulated) gradient the optimizer reads. They are widened a chunk at a
// time, so no fp32 copy of a whole unit exists: each chunk takes the same
// slice of every rank's piece, so its sums are those of one whole reduction.
absl::Status Engine::ReduceWidened(int unit, const char* staging, bool first) {
  const Unit& u = layout_.units()[unit];
  const size_t n = layout_.world_size();
  const bool whole = config_.stage == 0;  // all-reduce: every element, contiguous
  const size_t span = whole ? u.padded : u.shard;
  const size_t step = std::clamp<size_t>(config_.reduce_chunk_elements / (whole ? 1 : n), 1, span);
  ASSIGN_OR_RETURN(Buffer wide, Buffer::Allocate(pool_, (whole ? 1 : n) * step * sizeof(float),
                                                 Tag::kCommunication, stream_));
  Buffer piece;
  if (!whole) {
    ASSIGN_OR_RETURN(piece, Buffer::Allocate(pool_, step * sizeof(float), Tag::kCommunication,
                                             stream_));
  }
  float* w = wide.data<float>();
  for (size_t at = 0; at < span; at += step) {
    const size_t k = std::min(step, span - at);
    RETURN_IF_ERROR(OnHost("mixed-precision reduction", [&] {
      for (size_t r = 0; r < (whole ? 1 : n); ++r) {
        Widen(staging + (r * u.shard + at) * esize_, dtype_, w + r * k, k);
      }
    }));
    if (whole) {
      RETURN_IF_ERROR(comm_->AllReduce(w, w, k, DType::kF32, ReduceOp::kSum, stream_));
      RETURN_IF_ERROR(Store(At(grads_, u.offset + at), w, k, first));
    } else {
      RETURN_IF_ERROR(comm_->ReduceScatter(w, piece.data(), k, DType::kF32, ReduceOp::kSum,
                                           stream_));
      RETURN_IF_ERROR(Store(OwnedGrad(unit) + at * esize_, piece.data<float>(), k, first));
    }
  }
  return absl::OkStatus();
}

// The reduced gradients the optimizer reads for `unit`.
char* Engine::OwnedGrad(int unit) {
  const Unit& u = layout_.units()[unit];
  if (config_.stage == 0) return At(grads_, u.offset);
  if (!owned_grads_) return At(grads_, owned_offset(unit));
  return At(owned_grads_, u.shard_offset);
}

absl::Status Engine::Store(char* into, const float* from, size_t count, bool first) {
  return OnHost("gradient accumulation", [&] {
    if (first) {
      Narrow(from, into, dtype_, count);
    } else {
      AccumulateNarrow(into, dtype_, from, count);
    }
  });
}

absl::Status Engine::OnHost(const char* what, const std::function<void()>& loop) {
  if (!has_bytes()) return absl::OkStatus();
  if (devices_->kind() == DeviceKind::kCuda) {
    return absl::UnimplementedError(absl::StrFormat("%s on cards is not implemented yet", what));
  }
  RETURN_IF_ERROR(stream_->Synchronize());
  loop();
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
