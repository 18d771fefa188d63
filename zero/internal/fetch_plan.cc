#include "zero/internal/fetch_plan.h"

#include <algorithm>
#include <utility>

namespace zero {

FetchPlan::FetchPlan(std::vector<int> order, const std::vector<std::vector<int>>& module_units,
                     const std::vector<bool>& persistent, std::vector<size_t> padded)
    : order_(std::move(order)), padded_(std::move(padded)), claimed_for_(padded_.size(), -1) {
  begin_.assign(order_.size() + 1, 0);
  const int modules = static_cast<int>(module_units.size());
  use_begin_.assign(modules + 1, 0);
  for (size_t i = 0; i < order_.size(); ++i) {
    begin_[i] = entries_.size();
    // Persistent units are always gathered: nothing to decide, no window.
    for (int u : module_units[order_[i]]) {
      if (!persistent[u]) entries_.push_back({u, static_cast<int>(i)});
    }
    ++use_begin_[order_[i] + 1];
  }
  begin_[order_.size()] = entries_.size();
  for (int m = 0; m < modules; ++m) use_begin_[m + 1] += use_begin_[m];
  uses_.resize(order_.size());
  std::vector<int> fill(use_begin_.begin(), use_begin_.end() - 1);
  for (size_t i = 0; i < order_.size(); ++i) uses_[fill[order_[i]]++] = static_cast<int>(i);
  StartStep();
}

void FetchPlan::StartStep() {
  front_ = ahead_ = window_ = 0;
  std::fill(claimed_for_.begin(), claimed_for_.end(), -1);
  if (!use_begin_.empty()) next_use_.assign(use_begin_.begin(), use_begin_.end() - 1);
}

// Each entry leaves the window once per step.
void FetchPlan::Advance(size_t fetched) {
  if (order_.empty()) return;
  const size_t front = begin_[std::min(fetched, order_.size())];
  for (; front_ < front; ++front_) {
    if (front_ < ahead_) window_ -= padded_[entries_[front_].unit];
  }
  ahead_ = std::max(ahead_, front_);
}

std::optional<int> FetchPlan::Next(size_t budget) const {
  if (ahead_ >= entries_.size()) return std::nullopt;
  const int unit = entries_[ahead_].unit;
  if (window_ + padded_[unit] > budget) return std::nullopt;
  return unit;
}

void FetchPlan::Take() {
  const Entry& entry = entries_[ahead_++];
  claimed_for_[entry.unit] = entry.position;
  window_ += padded_[entry.unit];
}

bool FetchPlan::ReusedSoon(int module, size_t next, int distance) {
  if (distance == 0 || order_.empty()) return false;
  const int end = use_begin_[module + 1];
  int& i = next_use_[module];
  while (i < end && static_cast<size_t>(uses_[i]) < next) ++i;
  return i < end && static_cast<size_t>(uses_[i]) < next + distance;
}

}  // namespace zero
