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
  claimed_for_.assign(units_.size(), -1);
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

// Gathers the units the recorded order says come next. The look-ahead is a
// window over the plan, from the position after the one fetched last to a
// cursor that only moves forward: it holds at most prefetch_elements
// elements of entries, gathered or not (DeepSpeed's numel_prefetching), so
// a step decides each entry once and a Fetch costs O(1) amortized however
// long the order is. Gathers never pass max_live_elements. Every rank
// follows the same order, so the extra collectives line up.
absl::Status Engine::Prefetch() {
  if (order_.empty()) return absl::OkStatus();  // the first step records the order
  AdvanceFront();
  while (ahead_ < plan_.size()) {
    const PlanEntry& entry = plan_[ahead_];
    const size_t padded = layout_.units()[entry.unit].padded;
    if (window_ + padded > config_.prefetch_elements) break;
    if (!units_[entry.unit].gathered) {
      if (live_elements_ + padded > config_.max_live_elements) break;
      RETURN_IF_ERROR(GatherUnit(entry.unit));
    }
    claimed_for_[entry.unit] = entry.position;
    window_ += padded;
    ++ahead_;
  }
  return absl::OkStatus();
}

// The entries of the positions fetched so far leave the window; each entry
// leaves once per step.
void Engine::AdvanceFront() {
  const size_t front = plan_begin_[std::min(trace_.size(), order_.size())];
  for (; front_ < front; ++front_) {
    if (front_ < ahead_) window_ -= layout_.units()[plan_[front_].unit].padded;
  }
  ahead_ = std::max(ahead_, front_);
}

absl::Status Engine::Release(int module) {
  if (module < 0 || module >= static_cast<int>(module_units_.size()) ||
      fetch_count_[module] == 0) {
    return Fail(absl::FailedPreconditionError(absl::StrFormat(
        "rank %d: Release of module %d, which is not fetched", rank_, module)));
  }
  if (--fetch_count_[module] > 0 || config_.stage < 3 || ReusedSoon(module)) {
    return absl::OkStatus();
  }
  const int now = static_cast<int>(trace_.size()) - 1;
  for (int u : module_units_[module]) {
    if (units_[u].persistent || !units_[u].gathered || claimed_for_[u] > now) continue;
    units_[u].gathered.Reset();
    live_elements_ -= layout_.units()[u].padded;
  }
  return absl::OkStatus();
}

// Whether `module` comes again within max_reuse_distance fetches of the
// recorded order. Its next position only moves forward during a step.
bool Engine::ReusedSoon(int module) {
  if (config_.max_reuse_distance == 0 || order_.empty()) return false;
  const size_t next = trace_.size();
  const int end = use_begin_[module + 1];
  int& i = next_use_[module];
  while (i < end && static_cast<size_t>(uses_[i]) < next) ++i;
  return i < end && static_cast<size_t>(uses_[i]) < next + config_.max_reuse_distance;
}

void Engine::BuildPlan() {
  plan_.clear();
  plan_begin_.assign(order_.size() + 1, 0);
  const int modules = static_cast<int>(module_units_.size());
  use_begin_.assign(modules + 1, 0);
  for (size_t i = 0; i < order_.size(); ++i) {
    plan_begin_[i] = plan_.size();
    // Persistent units are always gathered: nothing to decide, no window.
    for (int u : module_units_[order_[i]]) {
      if (!units_[u].persistent) plan_.push_back({u, static_cast<int>(i)});
    }
    ++use_begin_[order_[i] + 1];
  }
  plan_begin_[order_.size()] = plan_.size();
  for (int m = 0; m < modules; ++m) use_begin_[m + 1] += use_begin_[m];
  uses_.resize(order_.size());
  std::vector<int> fill(use_begin_.begin(), use_begin_.end() - 1);
  for (size_t i = 0; i < order_.size(); ++i) uses_[fill[order_[i]]++] = static_cast<int>(i);
}

void Engine::ResetCursor() {
  front_ = ahead_ = window_ = 0;
  if (!use_begin_.empty()) next_use_.assign(use_begin_.begin(), use_begin_.end() - 1);
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
  if (order_.empty()) {
    RETURN_IF_ERROR(CheckAgreement(Fnv1a(trace_.data(), trace_.size() * sizeof(int)),
                                   "the order of module fetches in the first step"));
    order_ = trace_;
    BuildPlan();
  }
  trace_.clear();
  ResetCursor();
  return RefreshGathered();
}

// Also drops the claims: positions count from 0 again in the next step.
absl::Status Engine::RefreshGathered() {
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    claimed_for_[u] = -1;
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
