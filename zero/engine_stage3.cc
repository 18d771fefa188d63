// Stage 3: parameters live as this rank's pieces; Fetch gathers a module's
// units on demand (and prefetches along the order recorded in the first
// step), Release frees them unless they are persistent or reused soon.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "zero/engine.h"

namespace zero {

absl::Status Engine::InitModules() {
  int modules = 0;
  for (const ParamSlot& p : layout_.params()) modules = std::max(modules, p.module + 1);
  module_units_.assign(modules, {});
  fetch_count_.assign(modules, 0);
  // Below stage 3 a unit may hold several modules: map each module to the
  // units its parameters are in.
  for (const ParamSlot& p : layout_.params()) {
    std::vector<int>& units = module_units_[p.module];
    if (units.empty() || units.back() != p.unit) units.push_back(p.unit);
  }
  if (config_.stage < 3) return absl::OkStatus();
  for (int u = 0; u < static_cast<int>(layout_.units().size()); ++u) {
    const Unit& unit = layout_.units()[u];
    if (unit.numel >= config_.persistence_threshold) continue;
    // Small units stay whole; zeros until SetParam fills them.
    units_[u].persistent = true;
    ASSIGN_OR_RETURN(units_[u].gathered, Buffer::Allocate(pool_, unit.padded * esize_,
                                                          Tag::kGathered, stream_));
    if (has_bytes()) {
      RETURN_IF_ERROR(stream_->Fill(units_[u].gathered.data(), 0, unit.padded * esize_));
    }
    live_elements_ += unit.padded;
  }
  return stream_->Synchronize();
}

char* Engine::param_data(int unit) {
  if (config_.stage < 3) return At(params_, layout_.units()[unit].offset);
  return units_[unit].gathered.data<char>();
}

absl::Status Engine::Fetch(int module) {
  if (module < 0 || module >= static_cast<int>(module_units_.size()) ||
      module_units_[module].empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrFormat(
        "rank %d: Fetch of module %d, which has no registered parameters", rank_, module)));
  }
  ++fetch_count_[module];
  if (config_.stage < 3) return absl::OkStatus();
  trace_.push_back(module);
  for (int u : module_units_[module]) {
    if (!units_[u].gathered) {
      if (absl::Status s = GatherUnit(u); !s.ok()) return Fail(s);
    }
  }
  if (absl::Status s = Prefetch(); !s.ok()) return Fail(s);
  return absl::OkStatus();
}

absl::Status Engine::GatherUnit(int unit) {
  const Unit& u = layout_.units()[unit];
  Buffer& gathered = units_[unit].gathered;
  if (!gathered) {
    ASSIGN_OR_RETURN(gathered, Buffer::Allocate(pool_, u.padded * esize_,
                                                Tag::kGathered, stream_));
    live_elements_ += u.padded;
  }
  const void* piece = At(params_, u.shard_offset);
  Buffer staged;  // parameter offload: the piece comes up from the host first
  if (config_.offload == Offload::kParameters) {
    ASSIGN_OR_RETURN(staged, Buffer::Allocate(pool_, u.shard * esize_, Tag::kCommunication,
                                              stream_));
    if (has_bytes()) RETURN_IF_ERROR(stream_->Copy(staged.data(), piece, u.shard * esize_));
    piece = staged.data();
  }
  return comm_->AllGather(piece, gathered.data(), u.shard, dtype_, stream_);
}

// Gathers the units the plan's window takes next (zero/fetch_plan.h),
// never past max_live_elements. Every rank follows the same order, so the
// extra collectives line up.
absl::Status Engine::Prefetch() {
  if (plan_.empty()) return absl::OkStatus();  // the first step records the order
  plan_.Advance(trace_.size());
  while (std::optional<int> unit = plan_.Next(config_.prefetch_elements)) {
    if (!units_[*unit].gathered) {
      if (live_elements_ + layout_.units()[*unit].padded > config_.max_live_elements) break;
      RETURN_IF_ERROR(GatherUnit(*unit));
    }
    plan_.Take();
  }
  return absl::OkStatus();
}

absl::Status Engine::Release(int module) {
  if (module < 0 || module >= static_cast<int>(module_units_.size()) ||
      fetch_count_[module] == 0) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: Release of module %d, which is not fetched", rank_, module)));
  }
  if (--fetch_count_[module] > 0 || config_.stage < 3 ||
      plan_.ReusedSoon(module, trace_.size(), config_.max_reuse_distance)) {
    return absl::OkStatus();
  }
  const int now = static_cast<int>(trace_.size()) - 1;
  for (int u : module_units_[module]) {
    if (units_[u].persistent || !units_[u].gathered || plan_.ClaimedAfter(u, now)) continue;
    units_[u].gathered.Reset();
    live_elements_ -= layout_.units()[u].padded;
  }
  return absl::OkStatus();
}

// After the update: the first step's order becomes the prefetch plan (once
// every rank agrees on it), gathered copies are stale and go, persistent
// units are gathered afresh.
absl::Status Engine::FinishStepStage3() {
  for (int m = 0; m < static_cast<int>(fetch_count_.size()); ++m) {
    if (fetch_count_[m] > 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "rank %d: Step while module %d is still fetched (Release it first)", rank_, m));
    }
  }
  if (plan_.empty()) {
    RETURN_IF_ERROR(CheckAgreement(Fnv1a(trace_.data(), trace_.size() * sizeof(int)),
                                   "the order of module fetches in the first step"));
    std::vector<bool> persistent(units_.size());
    std::vector<size_t> padded(units_.size());
    for (size_t u = 0; u < units_.size(); ++u) {
      persistent[u] = units_[u].persistent;
      padded[u] = layout_.units()[u].padded;
    }
    plan_ = FetchPlan(trace_, module_units_, persistent, std::move(padded));
  }
  trace_.clear();
  plan_.StartStep();
  return RefreshGathered();
}

absl::Status Engine::RefreshGathered() {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    if (units_[u].persistent) {
      RETURN_IF_ERROR(GatherUnit(u));
    } else if (units_[u].gathered) {
      units_[u].gathered.Reset();
      live_elements_ -= layout_.units()[u].padded;
    }
  }
  return absl::OkStatus();
}

}  // namespace zero
