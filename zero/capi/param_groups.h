// torch's parameter groups inside one engine: an Optimizer made of one
// optimizer per group that steps each element with its group's
// hyper-parameters. The engine hands its optimizer slices of the layout's
// flat elements (StepArgs::first_element says which, wherever the buffers
// are: device, pinned host, NVMe staging); Bind maps element ranges to
// groups from the layout, and Step splits each slice at group borders.
// The rules are element-wise, so the split changes no bit. Padding elements
// go with the parameter before them. Not thread-safe against SetGroupLr
// (as Optimizer::set_lr); concurrent Steps on disjoint slices are fine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizers/optimizer.h"
#include "zero/capi/engine_json.h"
#include "zero/layout.h"

namespace zero {

class GroupedOptimizer : public Optimizer {
 public:
  // InvalidArgument when a group's hyper-parameters are.
  static absl::StatusOr<std::unique_ptr<GroupedOptimizer>> Create(const OptimizerGroups& groups);

  // Before the first Step: `param_groups[i]` is the group of parameter i
  // of the engine's layout. Not needed with one group.
  absl::Status Bind(const Layout& layout, const std::vector<int>& param_groups);

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
  // Flat elements [begin, end) of the layout, all of group `group`.
  struct Range {
    size_t begin, end;
    int group;
  };
  explicit GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> groups);
  // Calls `step(group, sub_args)` for each group's part of `args`, in order.
  template <class StepFn>
  absl::Status Split(const StepArgs& args, StepFn step) const;
  std::vector<std::unique_ptr<Optimizer>> groups_;
  std::string name_;
  int state_buffers_ = 0;
  std::vector<Range> ranges_;  // sorted by begin, disjoint, neighbours of other groups
};

}  // namespace zero
