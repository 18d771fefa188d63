#include "optimizers/grouped_optimizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero {

absl::StatusOr<std::unique_ptr<GroupedOptimizer>> GroupedOptimizer::Create(
    const OptimizerGroups& groups) {
  std::vector<std::unique_ptr<Optimizer>> made;
  for (int g = 0; g < groups.size(); ++g) {
    absl::StatusOr<std::unique_ptr<Optimizer>> one = groups.Make(g);
    if (!one.ok()) return Annotate(one.status(), absl::StrFormat("parameter group %d", g));
    made.push_back(*std::move(one));
  }
  if (made.empty()) return absl::InvalidArgumentError("no parameter groups");
  return std::unique_ptr<GroupedOptimizer>(new GroupedOptimizer(std::move(made)));
}

GroupedOptimizer::GroupedOptimizer(std::vector<std::unique_ptr<Optimizer>> groups)
    : groups_(std::move(groups)), name_(groups_[0]->name()) {
  for (const auto& g : groups_) state_buffers_ = std::max(state_buffers_, g->state_buffers());
}

absl::Status GroupedOptimizer::SetGroupLr(int group, double lr) {
  if (group < 0 || group >= group_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no parameter group %d (%d are configured)", group, group_count()));
  }
  return groups_[group]->set_lr(lr);
}

void GroupedOptimizer::DoSetLr(double lr) {
  for (auto& g : groups_) (void)g->set_lr(lr);  // already validated by set_lr
}

absl::Status GroupedOptimizer::Bind(std::span<const GroupRange> ranges) {
  std::vector<GroupRange> kept;
  size_t at = 0;
  for (const GroupRange& r : ranges) {
    if (r.begin > r.end || r.begin < at) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "element range [%d, %d) is reversed or not after the one before it (ending at %d)",
          r.begin, r.end, at));
    }
    if (r.group < 0 || r.group >= group_count()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("element range [%d, %d) is in group %d; %d groups are configured",
                          r.begin, r.end, r.group, group_count()));
    }
    at = r.end;
    if (r.begin == r.end) continue;
    if (!kept.empty() && kept.back().group == r.group && kept.back().end == r.begin) {
      kept.back().end = r.end;
    } else {
      kept.push_back(r);
    }
  }
  // One group steps every element whole: nothing to split.
  if (group_count() == 1) kept.clear();
  ranges_ = std::move(kept);
  return absl::OkStatus();
}

template <class StepFn>
absl::Status GroupedOptimizer::Split(const StepArgs& args, StepFn step) const {
  const size_t begin = args.first_element, end = begin + args.params.size();
  const size_t grad_size = SizeOf(args.grad_dtype), copy_size = SizeOf(args.copy_dtype);
  // One part of the slice, elements [from, to), stepped with group `group`'s optimizer.
  auto part = [&](size_t from, size_t to, int group) -> absl::Status {
    const size_t skip = from - begin, n = to - from;
    std::vector<std::span<float>> state;
    for (int i = 0; i < groups_[group]->state_buffers(); ++i) {
      state.push_back(args.state[i].subspan(skip, n));
    }
    StepArgs sub = args;
    sub.params = args.params.subspan(skip, n);
    sub.grads = static_cast<const char*>(args.grads) + skip * grad_size;
    sub.state = state;
    if (args.param_copy != nullptr) {
      sub.param_copy = static_cast<char*>(args.param_copy) + skip * copy_size;
    }
    sub.first_element = from;
    return step(*groups_[group], sub);
  };
  // Elements no range covers (one group, or not bound) step with group 0.
  auto first = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                                [](size_t e, const GroupRange& r) { return e < r.end; });
  size_t at = begin;
  for (auto r = first; r != ranges_.end() && r->begin < end && at < end; ++r) {
    if (r->begin > at) RETURN_IF_ERROR(part(at, std::min(r->begin, end), 0));
    at = std::max(at, r->begin);
    const size_t to = std::min(r->end, end);
    if (to > at) RETURN_IF_ERROR(part(at, to, r->group));
    at = std::max(at, to);
  }
  if (at < end) RETURN_IF_ERROR(part(at, end, 0));
  return absl::OkStatus();
}

HostStep GroupedOptimizer::DoBindHostStep(const StepArgs& args) const {
  // Each group's part is bound now, with that group's settings. The slices
  // the engine passes are valid (BindHostStep checked them), so the parts
  // are too; an error here would be a bug in Split.
  std::vector<HostStep> parts;
  (void)Split(args, [&parts](const Optimizer& group, const StepArgs& sub) -> absl::Status {
    absl::StatusOr<HostStep> part = group.BindHostStep(sub);
    if (!part.ok()) return part.status();
    parts.push_back(*std::move(part));
    return absl::OkStatus();
  });
  return [parts = std::move(parts)]() mutable {
    for (HostStep& part : parts) std::move(part)();
  };
}

absl::Status GroupedOptimizer::DoStepCuda(const StepArgs& args, void* stream) {
  return Split(args, [stream](Optimizer& group, const StepArgs& sub) {
    return group.StepCuda(sub, stream);
  });
}

}  // namespace zero
