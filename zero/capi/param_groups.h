// torch's parameter groups inside one engine: an Optimizer made of one
// optimizer per group that steps each element with its group's
// hyper-parameters. The engine hands its optimizer slices of this rank's
// master buffers; Bind tells which element of them belongs to which group
// (from the engine's layout), and Step splits each slice at group borders.
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
#include "zero/engine.h"

namespace zero {

class GroupedOptimizer : public Optimizer {
 public:
  // InvalidArgument when a group's hyper-parameters are.
  static absl::StatusOr<std::unique_ptr<GroupedOptimizer>> Create(const OptimizerGroups& groups);

  // After Engine::Create, before the first Step: `param_groups[i]` is the
  // group of the engine's parameter i; `rank` is the engine's. Not needed
  // with one group.
  absl::Status Bind(Engine& engine, int rank, const std::vector<int>& param_groups);

  int group_count() const { return static_cast<int>(groups_.size()); }
  absl::Status SetGroupLr(int group, double lr);
  double group_lr(int group) const { return groups_[group]->lr(); }

  std::string_view name() const override { return name_; }
  int state_buffers() const override { return state_buffers_; }
  double lr() const override { return groups_[0]->lr(); }

 protected:
  void DoStep(const StepArgs& args) override;
  absl::Status DoStepCuda(const StepArgs& args, void* stream) override;
  void DoSetLr(double lr) override;

 private:
  // Elements [begin, end) of a master buffer, all of group `group`.
  struct Range {
    const float* begin;
    const float* end;
    int group;
  };
  explicit GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> groups);
  // Calls `step(group, sub_args)` for each group's part of `args`, in order.
  template <class StepFn>
  absl::Status Split(const StepArgs& args, StepFn step) const;
  // Ranges for flat elements [first, first + count) of `unit`, stored from `at`.
  void AddRanges(const Layout& layout, int unit, const float* at, size_t first, size_t count,
                 const std::vector<int>& param_groups);

  std::vector<std::unique_ptr<Optimizer>> groups_;
  std::string name_;
  int state_buffers_ = 0;
  std::vector<Range> ranges_;  // sorted by begin, disjoint
};

}  // namespace zero
