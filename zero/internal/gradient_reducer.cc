#include "zero/internal/gradient_reducer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace zero {

GradientReducer::GradientReducer(const RankContext& ctx, ModelStates& states,
                                 OnReduced on_reduced)
    : ctx_(ctx),
      states_(states),
      on_reduced_(std::move(on_reduced)),
      units_(ctx.unit_count()),
      received_(ctx.layout.params().size(), 0),
      next_unit_to_reduce_(ctx.unit_count() - 1) {}

// What every hand-over checks: a registered parameter, not yet handed over
// in this micro-batch, in a step that still takes gradients.
absl::Status GradientReducer::CheckHandOver(int id, int64_t step) const {
  const int count = static_cast<int>(ctx_.layout.params().size());
  if (id < 0 || id >= count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: gradient for parameter #%d, but %d are registered", ctx_.rank, id, count));
  }
  if (received_[id] == kWritten) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: gradient of '%s' handed over twice in micro-batch %d", ctx_.rank,
        ctx_.layout.params()[id].name, micro_batches_ + 1));
  }
  if (micro_batches_ == ctx_.config.gradient_accumulation_steps) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: all %d micro-batches of step %d are complete: call Step before more "
        "gradients", ctx_.rank, micro_batches_, step));
  }
  return absl::OkStatus();
}

absl::StatusOr<char*> GradientReducer::Slot(int id, int64_t step) {
  RETURN_IF_ERROR(CheckHandOver(id, step));
  ASSIGN_OR_RETURN(char* slot, SlotOf(id));
  received_[id] = kSlotted;
  return slot;
}

absl::Status GradientReducer::Written(int id, const std::shared_ptr<Event>& written,
                                      int64_t step) {
  RETURN_IF_ERROR(CheckHandOver(id, step));
  // The slot moves between micro-batches, and taking it readies the unit's
  // buffer (padding zeroed, the last reduction waited for).
  if (received_[id] != kSlotted) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: GradWritten for '%s' without GradBuffer in micro-batch %d (the buffer "
        "changes between micro-batches: take it again)",
        ctx_.rank, ctx_.layout.params()[id].name, micro_batches_ + 1));
  }
  if (written) RETURN_IF_ERROR(ctx_.stream->Wait(written));
  return MarkWritten(id);
}

// Below: `id` already passed CheckHandOver.
absl::StatusOr<char*> GradientReducer::SlotOf(int id) {
  const ParamSlot& p = ctx_.layout.params()[id];
  ASSIGN_OR_RETURN(char* staging, StagingFor(p.unit));
  return staging + (p.offset - ctx_.unit(p.unit).offset) * ctx_.esize;
}

absl::Status GradientReducer::MarkWritten(int id) {
  received_[id] = kWritten;
  ++units_[ctx_.layout.params()[id].unit].received;
  return ReduceReadyUnits();
}

absl::Status GradientReducer::Add(int id, const void* grad, size_t numel, DType dtype,
                                  const std::shared_ptr<Event>& ready, bool on_device,
                                  int64_t step) {
  RETURN_IF_ERROR(CheckHandOver(id, step));
  const ParamSlot& p = ctx_.layout.params()[id];
  if (dtype != ctx_.dtype || numel != p.numel || (grad == nullptr && ctx_.has_bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: gradient of '%s' is %s x %d%s, the parameter is %s x %d", ctx_.rank, p.name,
        std::string(Name(dtype)), numel, grad == nullptr ? " (null)" : "",
        std::string(Name(ctx_.dtype)), p.numel));
  }
  ASSIGN_OR_RETURN(char* slot, SlotOf(id));
  if (ready) RETURN_IF_ERROR(ctx_.stream->Wait(ready));
  if (ctx_.has_bytes) {
    // Device memory is the caller's to keep until the copy ran (stream
    // order); any other host memory may be reused on return: staged.
    const size_t bytes = numel * ctx_.esize;
    RETURN_IF_ERROR(on_device ? ctx_.stream->Copy(slot, grad, bytes)
                              : ctx_.stream->CopyFromPageable(slot, grad, bytes));
  }
  return MarkWritten(id);
}

absl::Status GradientReducer::ReadyForStep() const {
  const int gas = ctx_.config.gradient_accumulation_steps;
  const int partial = static_cast<int>(std::count(received_.begin(), received_.end(), kWritten));
  if (micro_batches_ == gas && partial == 0) return absl::OkStatus();
  std::vector<std::string> missing;
  for (size_t i = 0; i < received_.size() && missing.size() < 5; ++i) {
    if (received_[i] != kWritten) missing.push_back("'" + ctx_.layout.params()[i].name + "'");
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "rank %d: Step before every gradient arrived: %d of %d micro-batches complete%s",
      ctx_.rank, micro_batches_, gas,
      partial > 0 ? absl::StrFormat(", micro-batch %d still lacks %s", micro_batches_ + 1,
                                    absl::StrJoin(missing, ", "))
                  : std::string()));
}

// Where unit `unit`'s gradients of this micro-batch are staged. Stages 0-1
// keep whole gradients, so the first micro-batch stages (and reduces) in
// place; otherwise the unit gets a buffer of its own until it is reduced.
absl::StatusOr<char*> GradientReducer::StagingFor(int unit) {
  const Unit& u = ctx_.unit(unit);
  UnitState& state = units_[unit];
  const int stage = ctx_.config.stage;
  char* staging = nullptr;
  const bool in_states = stage == 1 || (stage == 0 && micro_batches_ == 0);
  if (in_states) {
    staging = states_.WholeGrads(unit);
  } else {
    if (!state.staging) {
      ASSIGN_OR_RETURN(state.staging, Buffer::Allocate(ctx_.pool, u.padded * ctx_.esize,
                                                       Tag::kCommunication, ctx_.stream));
    }
    staging = state.staging.data<char>();
  }
  if (state.readied) return staging;
  if (in_states && state.reduced) {
    // The last micro-batch's reduction may still read these gradients.
    RETURN_IF_ERROR(ctx_.stream->Wait(state.reduced));
  }
  if (ctx_.has_bytes) RETURN_IF_ERROR(ZeroPadding(unit, staging));
  state.readied = true;
  ++readied_;
  return staging;
}

// A fill per gap for a few, else one fill from the first gap to the last:
// O(units) operations, not one per parameter. Every gradient of the unit
// is written after this in stream order (each parameter once per
// micro-batch), so zeroing the slots between the gaps loses nothing.
absl::Status GradientReducer::ZeroPadding(int unit, char* staging) {
  constexpr size_t kFillsPerUnit = 2;
  const auto gaps = ctx_.layout.PaddingOf(unit);
  if (gaps.empty()) return absl::OkStatus();
  const size_t esize = ctx_.esize;
  if (gaps.size() <= kFillsPerUnit) {
    for (const auto& [begin, end] : gaps) {
      RETURN_IF_ERROR(ctx_.stream->Fill(staging + begin * esize, 0, (end - begin) * esize));
    }
    return absl::OkStatus();
  }
  const size_t begin = gaps.front().first, end = gaps.back().second;
  return ctx_.stream->Fill(staging + begin * esize, 0, (end - begin) * esize);
}

absl::Status GradientReducer::ReduceReadyUnits() {
  while (next_unit_to_reduce_ >= 0) {
    const Unit& u = ctx_.unit(next_unit_to_reduce_);
    if (units_[next_unit_to_reduce_].received < u.end_param - u.first_param) break;
    RETURN_IF_ERROR(ReduceUnit(next_unit_to_reduce_));
    if (on_reduced_) RETURN_IF_ERROR(on_reduced_(next_unit_to_reduce_));
    --next_unit_to_reduce_;
  }
  if (next_unit_to_reduce_ < 0) {
    ++micro_batches_;
    ResetMicroBatch();
  }
  return absl::OkStatus();
}

// Enqueued on the communication stream once the compute stream's writes of
// the gradients are done, so it overlaps the backward still being enqueued.
absl::Status GradientReducer::ReduceUnit(int unit) {
  const Unit& u = ctx_.unit(unit);
  ASSIGN_OR_RETURN(char* staging, StagingFor(unit));
  const bool first = micro_batches_ == 0;
  Communicator* comm = ctx_.comm;
  Stream* stream = ctx_.comm_stream;
  RETURN_IF_ERROR(RankContext::Order(stream, ctx_.stream));
  if (ctx_.mixed) {
    RETURN_IF_ERROR(ReduceWidened(unit, staging, first));
  } else if (ctx_.config.stage == 0) {
    float* sum = reinterpret_cast<float*>(staging);
    RETURN_IF_ERROR(comm->AllReduce(sum, sum, u.padded, DType::kF32, ReduceOp::kSum, stream));
    RETURN_IF_ERROR(AcrossReplicas(sum, u.padded));
    if (!first) RETURN_IF_ERROR(Store(states_.WholeGrads(unit), sum, u.padded, first));
  } else if (first && !ctx_.offload()) {
    // Lands in this rank's piece: of the whole gradients in place (stage 1
    // without accumulation), else of the owned gradients.
    RETURN_IF_ERROR(ReduceScatter(unit, reinterpret_cast<const float*>(staging),
                                  reinterpret_cast<float*>(states_.OwnedGrads(unit)), u.shard, 0));
  } else {
    ASSIGN_OR_RETURN(Buffer piece, Buffer::Allocate(ctx_.pool, u.shard * sizeof(float),
                                                    Tag::kCommunication, stream));
    RETURN_IF_ERROR(ReduceScatter(unit, reinterpret_cast<const float*>(staging),
                                  piece.data<float>(), u.shard, 0));
    // Free before the store, which does not read it: the next unit's bucket
    // (on the compute stream) then waits for the reduction only.
    ReleaseStaging(unit);
    RETURN_IF_ERROR(Store(states_.OwnedGrads(unit), piece.data<float>(), u.shard, first));
  }
  // Stage 2: the gradients this rank does not own are gone as soon as
  // reduced, once the communication stream is done with them.
  ReleaseStaging(unit);
  UnitState& state = units_[unit];
  if (stream != ctx_.stream) {
    ASSIGN_OR_RETURN(state.reduced, stream->Record());
  }
  return absl::OkStatus();
}

// bf16/fp16 gradients are summed in fp32 and the sum rounded once into the
// (accumulated) gradient the optimizer reads. They are widened a chunk at a
// time, so no fp32 copy of a whole unit exists: each chunk takes the same
// slice of every rank's piece, so its sums are those of one whole reduction.
absl::Status GradientReducer::ReduceWidened(int unit, const char* staging, bool first) {
  const Unit& u = ctx_.unit(unit);
  const size_t n = ctx_.layout.world_size();
  const size_t esize = ctx_.esize;
  const bool whole = ctx_.config.stage == 0;  // all-reduce: every element, contiguous
  Stream* stream = ctx_.comm_stream;
  const size_t span = whole ? u.padded : u.shard;
  const size_t step =
      std::clamp<size_t>(ctx_.config.reduce_chunk_elements / (whole ? 1 : n), 1, span);
  ASSIGN_OR_RETURN(Buffer wide, Buffer::Allocate(ctx_.pool, (whole ? 1 : n) * step * sizeof(float),
                                                 Tag::kCommunication, stream));
  Buffer piece;
  if (!whole) {
    ASSIGN_OR_RETURN(piece, Buffer::Allocate(ctx_.pool, step * sizeof(float),
                                             Tag::kCommunication, stream));
  }
  float* w = wide.data<float>();
  for (size_t at = 0; at < span; at += step) {
    const size_t k = std::min(step, span - at);
    for (size_t r = 0; r < (whole ? 1 : n) && ctx_.has_bytes; ++r) {
      RETURN_IF_ERROR(ctx_.elementwise->Widen(w + r * k, staging + (r * u.shard + at) * esize, k,
                                              ctx_.dtype, stream));
    }
    if (whole) {
      RETURN_IF_ERROR(ctx_.comm->AllReduce(w, w, k, DType::kF32, ReduceOp::kSum, stream));
      RETURN_IF_ERROR(AcrossReplicas(w, k));
      RETURN_IF_ERROR(Store(states_.WholeGrads(unit) + at * esize, w, k, first));
    } else {
      RETURN_IF_ERROR(ReduceScatter(unit, w, piece.data<float>(), k, at * n));
      RETURN_IF_ERROR(Store(states_.OwnedGrads(unit) + at * esize, piece.data<float>(), k, first));
    }
  }
  return absl::OkStatus();
}

absl::Status GradientReducer::ReduceScatter(int unit, const float* send, float* recv,
                                            size_t count, size_t at) {
  const int bits = ctx_.config.quantized_gradients_bits;
  if (bits == 0) {
    RETURN_IF_ERROR(ctx_.comm->ReduceScatter(send, recv, count, DType::kF32, ReduceOp::kSum,
                                             ctx_.comm_stream));
    return AcrossReplicas(recv, count);
  }
  float* residual = nullptr;
  if (ctx_.config.error_feedback) {
    Buffer& kept = units_[unit].residual;
    if (!kept) {
      const size_t bytes = ctx_.unit(unit).padded * sizeof(float);
      ASSIGN_OR_RETURN(kept, Buffer::Allocate(ctx_.pool, bytes, Tag::kGradients,
                                              ctx_.comm_stream));
      if (ctx_.has_bytes) RETURN_IF_ERROR(ctx_.comm_stream->Fill(kept.data(), 0, bytes));
    }
    residual = kept.data<float>() + at;
  }
  RETURN_IF_ERROR(QuantizedReduceScatter(*ctx_.comm, send, recv, count, DType::kF32,
                                         ctx_.Quantized(bits, quantized_calls_++), residual));
  return AcrossReplicas(recv, count);
}

// Hybrid sharding: the group's sums added over the replicas, in group order
// (each group's sum, then the groups: hierarchical_communicator.h's order).
absl::Status GradientReducer::AcrossReplicas(float* data, size_t count) {
  if (ctx_.replicas == nullptr) return absl::OkStatus();
  return ctx_.replicas->AllReduce(data, data, count, DType::kF32, ReduceOp::kSum,
                                  ctx_.comm_stream);
}

// Enqueued on the communication stream after the reduction that wrote `from`.
absl::Status GradientReducer::Store(char* into, const float* from, size_t count, bool first) {
  if (!ctx_.has_bytes) return absl::OkStatus();
  Stream* stream = ctx_.comm_stream;
  const ElementwiseExecutor& ew = *ctx_.elementwise;
  return first ? ew.Narrow(into, from, count, ctx_.dtype, stream)
               : ew.AccumulateNarrow(into, from, count, ctx_.dtype, stream);
}

// Freed on the communication stream, after the work enqueued there so far.
void GradientReducer::ReleaseStaging(int unit) {
  units_[unit].staging.set_stream(ctx_.comm_stream);
  units_[unit].staging.Reset();
}

void GradientReducer::ResetMicroBatch() {
  for (UnitState& u : units_) {
    u.received = 0;
    u.readied = false;
    u.staging.Reset();
  }
  std::fill(received_.begin(), received_.end(), uint8_t{0});
  next_unit_to_reduce_ = ctx_.unit_count() - 1;
}

void GradientReducer::Clear() {
  ResetMicroBatch();
  micro_batches_ = 0;
}

}  // namespace zero
