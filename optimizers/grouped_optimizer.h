// torch's parameter groups inside one optimizer: an Optimizer made of one
// optimizer per group that steps each element with its group's
// hyper-parameters. The caller numbers all its elements (an engine: the
// flat buffer of its layout) and says which group owns which ranges of
// them (Bind); each step's slice says where it starts
// (StepArgs::first_element, wherever its buffers are: device, pinned host,
// NVMe staging) and is split at group borders. The rules are element-wise,
// so the split changes no bit. Not thread-safe against Bind or SetGroupLr
// (as Optimizer::set_lr); concurrent Steps on disjoint slices are fine.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizers/optimizer.h"
#include "optimizers/optimizer_groups.h"

namespace zero {

// The caller's elements [begin, end), all stepped with group `group`.
struct GroupRange {
  size_t begin = 0, end = 0;
  int group = 0;
};

class GroupedOptimizer : public Optimizer {
 public:
  // InvalidArgument when there is no group or a group's hyper-parameters
  // are invalid (naming the group).
  static absl::StatusOr<std::unique_ptr<GroupedOptimizer>> Create(const OptimizerGroups& groups);

  // Before the first Step: `ranges` in order of their elements, disjoint.
  // Elements no range covers step with group 0 (so one group needs no
  // Bind). InvalidArgument, changing nothing, for ranges out of order,
  // overlapping or reversed, or a group that is not configured.
  absl::Status Bind(std::span<const GroupRange> ranges);

  int group_count() const { return static_cast<int>(groups_.size()); }
  absl::Status SetGroupLr(int group, double lr);
  double group_lr(int group) const { return groups_[group]->lr(); }

  std::string_view name() const override { return name_; }
  int state_buffers() const override { return state_buffers_; }
  double lr() const override { return groups_[0]->lr(); }

 protected:
  HostStep DoBindHostStep(const StepArgs& args) const override;
  absl::Status DoStepCuda(const StepArgs& args, void* stream) override;
  void DoSetLr(double lr) override;

 private:
  explicit GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> groups);
  // Calls `step(group, sub_args)` for each group's part of `args`, in order.
  template <class StepFn>
  absl::Status Split(const StepArgs& args, StepFn step) const;
  std::vector<std::unique_ptr<Optimizer>> groups_;
  std::string name_;
  int state_buffers_ = 0;
  // Sorted, disjoint, non-empty; touching neighbours are of other groups.
  std::vector<GroupRange> ranges_;
};

}  // namespace zero
