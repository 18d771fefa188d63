#include "zero/internal/parameter_gatherer.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/fingerprint.h"
#include "base/status_macros.h"
#include "zero/internal/rank_agreement.h"

namespace zero {

ParameterGatherer::ParameterGatherer(const RankContext& ctx, ModelStates& states)
    : ctx_(ctx), states_(states), units_(ctx.unit_count()) {}

absl::StatusOr<std::unique_ptr<ParameterGatherer>> ParameterGatherer::Create(
    const RankContext& ctx, ModelStates& states) {
  std::unique_ptr<ParameterGatherer> g(new ParameterGatherer(ctx, states));
  int modules = 0;
  for (const ParamSlot& p : ctx.layout.params()) modules = std::max(modules, p.module + 1);
  g->module_units_.assign(modules, {});
  g->fetch_count_.assign(modules, 0);
  // Below stage 3 a unit may hold several modules: map each module to the
  // units its parameters are in.
  for (const ParamSlot& p : ctx.layout.params()) {
    std::vector<int>& units = g->module_units_[p.module];
    if (units.empty() || units.back() != p.unit) units.push_back(p.unit);
  }
  if (ctx.config.stage < 3) return g;
  if (ctx.config.hpz_partition_size > 1) {
    const std::optional<Communicator::Levels> levels = ctx.comm->levels();
    if (!levels || levels->intra->world_size() != ctx.config.hpz_partition_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "rank %d: hpz_partition_size %d needs a hierarchical communicator with that many "
          "ranks per node (this one has %s)",
          ctx.rank, ctx.config.hpz_partition_size,
          levels ? absl::StrCat(levels->intra->world_size(), " per node") : "one level"));
    }
    g->node_ = levels->intra;
  }
  for (int u = 0; u < ctx.unit_count(); ++u) {
    const Unit& unit = ctx.unit(u);
    // DeepSpeed's rule: persistent up to and including the threshold.
    if (unit.numel > ctx.config.persistence_threshold) continue;
    UnitState& state = g->units_[u];
    state.persistent = true;
    ASSIGN_OR_RETURN(state.gathered, Buffer::Allocate(ctx.pool, unit.padded * ctx.esize,
                                                      Tag::kGathered, ctx.stream));
    if (ctx.has_bytes) {
      RETURN_IF_ERROR(ctx.stream->Fill(state.gathered.data(), 0, unit.padded * ctx.esize));
    }
    g->live_elements_ += unit.padded;
  }
  RETURN_IF_ERROR(ctx.stream->Synchronize());
  return g;
}

absl::Status ParameterGatherer::AwaitWhole(int unit, Stream* consumer) const {
  const std::shared_ptr<Event>& ready = units_[unit].ready;
  return ready && consumer != ctx_.comm_stream ? consumer->Wait(ready) : absl::OkStatus();
}

absl::Status ParameterGatherer::AwaitFetchedOnHost(int module) const {
  if (module < 0 || module >= static_cast<int>(module_units_.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: AwaitFetchedOnHost of module %d (%d are registered)", ctx_.rank, module,
        module_units_.size()));
  }
  for (int u : module_units_[module]) {
    const std::shared_ptr<Event>& ready = units_[u].ready;
    // No event: the values were last written on ctx.stream (stage 0's step,
    // SetParam) or the gather ran there (one stream for both).
    RETURN_IF_ERROR(ready ? ready->Synchronize() : ctx_.stream->Synchronize());
  }
  return absl::OkStatus();
}

char* ParameterGatherer::Whole(int unit) const {
  if (ctx_.config.stage < 3) return states_.WholeParams(unit);
  return units_[unit].gathered.data<char>();
}

absl::Status ParameterGatherer::Fetch(int module, Stream* consumer) {
  if (module < 0 || module >= static_cast<int>(module_units_.size()) ||
      module_units_[module].empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: Fetch of module %d, which has no registered parameters", ctx_.rank, module));
  }
  ++fetch_count_[module];
  if (ctx_.config.stage == 3) {
    trace_.push_back(module);
    for (int u : module_units_[module]) {
      if (!units_[u].gathered) RETURN_IF_ERROR(GatherUnit(u));
    }
    RETURN_IF_ERROR(Prefetch());
  }
  for (int u : module_units_[module]) RETURN_IF_ERROR(AwaitWhole(u, consumer));
  return absl::OkStatus();
}

absl::Status ParameterGatherer::Publish(int unit) {
  Stream* stream = ctx_.comm_stream;
  RETURN_IF_ERROR(RankContext::Order(stream, ctx_.stream));
  const Unit& u = ctx_.unit(unit);
  RETURN_IF_ERROR(ctx_.comm->AllGather(states_.ModelPiece(unit), states_.WholeParams(unit),
                                       u.shard, ctx_.dtype, stream));
  return RecordReady(unit);
}

absl::Status ParameterGatherer::RecordReady(int unit) {
  if (ctx_.comm_stream == ctx_.stream) return absl::OkStatus();
  ASSIGN_OR_RETURN(units_[unit].ready, ctx_.comm_stream->Record());
  return absl::OkStatus();
}

// On the communication stream, after the pieces were last written (and a
// persistent unit's last reads) on the compute stream: pieces_ready_.
absl::Status ParameterGatherer::GatherUnit(int unit) {
  const Unit& u = ctx_.unit(unit);
  Stream* stream = ctx_.comm_stream;
  if (pieces_ready_ && stream != ctx_.stream) RETURN_IF_ERROR(stream->Wait(pieces_ready_));
  Buffer& gathered = units_[unit].gathered;
  if (!gathered) {
    ASSIGN_OR_RETURN(gathered, Buffer::Allocate(ctx_.pool, u.padded * ctx_.esize,
                                                Tag::kGathered, stream));
    live_elements_ += u.padded;
  }
  if (node_ != nullptr && units_[unit].secondary_valid) {
    RETURN_IF_ERROR(GatherSecondary(unit, gathered.data()));
    return RecordReady(unit);
  }
  const void* piece = states_.ModelPiece(unit);
  Buffer staged;  // parameter offload: the piece comes up from the host first
  if (ctx_.config.offload == Offload::kParameters) {
    ASSIGN_OR_RETURN(staged, Buffer::Allocate(ctx_.pool, u.shard * ctx_.esize,
                                              Tag::kCommunication, stream));
    if (ctx_.has_bytes) RETURN_IF_ERROR(stream->Copy(staged.data(), piece, u.shard * ctx_.esize));
    piece = staged.data();
  }
  RETURN_IF_ERROR(GatherPieces(unit, piece, gathered.data()));
  if (node_ != nullptr && !units_[unit].persistent) {
    RETURN_IF_ERROR(KeepSecondary(unit, gathered.data<char>()));
  }
  return RecordReady(unit);
}

absl::Status ParameterGatherer::GatherPieces(int unit, const void* piece, void* whole) {
  const Unit& u = ctx_.unit(unit);
  if (const int bits = ctx_.config.quantized_weights_bits; bits != 0) {
    return QuantizedAllGather(*ctx_.comm, piece, whole, u.shard, ctx_.dtype,
                              ctx_.Quantized(bits, quantized_calls_++));
  }
  return ctx_.comm->AllGather(piece, whole, u.shard, ctx_.dtype, ctx_.comm_stream);
}

// The node's partition: local rank l keeps elements [l * padded / G,
// (l + 1) * padded / G) of the gathered unit, so the node's all-gather of
// the secondary pieces puts them back in order.
absl::Status ParameterGatherer::KeepSecondary(int unit, const char* whole) {
  UnitState& state = units_[unit];
  const size_t part = ctx_.unit(unit).padded / node_->world_size() * ctx_.esize;
  if (!state.secondary) {
    ASSIGN_OR_RETURN(state.secondary,
                     Buffer::Allocate(ctx_.pool, part, Tag::kParameters, ctx_.comm_stream));
  }
  if (ctx_.has_bytes) {
    RETURN_IF_ERROR(
        ctx_.comm_stream->Copy(state.secondary.data(), whole + node_->rank() * part, part));
  }
  state.secondary_valid = true;
  return absl::OkStatus();
}

absl::Status ParameterGatherer::GatherSecondary(int unit, void* whole) {
  const size_t part = ctx_.unit(unit).padded / node_->world_size();
  return node_->AllGather(units_[unit].secondary.data(), whole, part, ctx_.dtype,
                          ctx_.comm_stream);
}

// Gathers the units the plan's window takes next (zero/internal/fetch_plan.h),
// never past max_live_elements. Every rank follows the same order, so the
// extra collectives line up.
absl::Status ParameterGatherer::Prefetch() {
  if (plan_.empty()) return absl::OkStatus();  // the first step records the order
  plan_.Advance(trace_.size());
  while (std::optional<int> unit = plan_.Next(ctx_.config.prefetch_elements)) {
    if (!units_[*unit].gathered) {
      if (live_elements_ + ctx_.unit(*unit).padded > ctx_.config.max_live_elements) break;
      RETURN_IF_ERROR(GatherUnit(*unit));
    }
    plan_.Take();
  }
  return absl::OkStatus();
}

absl::Status ParameterGatherer::Release(int module, Stream* consumer) {
  if (module < 0 || module >= static_cast<int>(module_units_.size()) ||
      fetch_count_[module] == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: Release of module %d, which is not fetched", ctx_.rank, module));
  }
  // Buffers are freed on the compute stream: after the consumer's kernels.
  RETURN_IF_ERROR(RankContext::Order(ctx_.stream, consumer));
  if (--fetch_count_[module] > 0 || ctx_.config.stage < 3 ||
      plan_.ReusedSoon(module, trace_.size(), ctx_.config.max_reuse_distance)) {
    return absl::OkStatus();
  }
  const int now = static_cast<int>(trace_.size()) - 1;
  for (int u : module_units_[module]) {
    if (units_[u].persistent || !units_[u].gathered || plan_.ClaimedAfter(u, now)) continue;
    RETURN_IF_ERROR(Drop(u));
  }
  return absl::OkStatus();
}

// Freed on the compute stream, after the gather (a prefetched unit may
// never have been waited for) and every use enqueued there so far.
absl::Status ParameterGatherer::Drop(int unit) {
  UnitState& state = units_[unit];
  RETURN_IF_ERROR(AwaitWhole(unit, ctx_.stream));
  state.gathered.set_stream(ctx_.stream);
  state.gathered.Reset();
  live_elements_ -= ctx_.unit(unit).padded;
  return absl::OkStatus();
}

absl::Status ParameterGatherer::NothingFetched(std::string_view call) const {
  if (ctx_.config.stage < 3) return absl::OkStatus();
  for (int m = 0; m < static_cast<int>(fetch_count_.size()); ++m) {
    if (fetch_count_[m] > 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "rank %d: %s while module %d is still fetched (Release it first)", ctx_.rank, call, m));
    }
  }
  return absl::OkStatus();
}

absl::Status ParameterGatherer::FinishStep() {
  if (ctx_.config.stage < 3) return absl::OkStatus();
  if (plan_.empty()) {
    RETURN_IF_ERROR(CheckAgreement(ctx_, Fnv1a(trace_.data(), trace_.size() * sizeof(int)),
                                   "the order of module fetches in the first step"));
    std::vector<bool> persistent(units_.size());
    std::vector<size_t> padded(units_.size());
    for (size_t u = 0; u < units_.size(); ++u) {
      persistent[u] = units_[u].persistent;
      padded[u] = ctx_.unit(u).padded;
    }
    plan_ = FetchPlan(trace_, module_units_, persistent, std::move(padded));
  }
  trace_.clear();
  plan_.StartStep();
  return Refresh();
}

absl::Status ParameterGatherer::Refresh() {
  if (ctx_.config.stage < 3) return absl::OkStatus();
  ASSIGN_OR_RETURN(pieces_ready_, ctx_.stream->Record());
  for (int u = 0; u < ctx_.unit_count(); ++u) {
    units_[u].secondary_valid = false;  // the update made them stale
    if (units_[u].persistent) {
      RETURN_IF_ERROR(GatherUnit(u));
    } else if (units_[u].gathered) {
      RETURN_IF_ERROR(Drop(u));
    }
  }
  return absl::OkStatus();
}

}  // namespace zero
