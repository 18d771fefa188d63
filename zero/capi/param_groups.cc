#include "zero/capi/param_groups.h"

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

absl::Status GroupedOptimizer::Bind(const Layout& layout, const std::vector<int>& param_groups) {
  if (param_groups.size() != layout.params().size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d parameter groups given for %d parameters", param_groups.size(),
        layout.params().size()));
  }
  for (size_t i = 0; i < param_groups.size(); ++i) {
    if (param_groups[i] < 0 || param_groups[i] >= group_count()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter '%s' is in group %d; %d groups are configured", layout.params()[i].name,
          param_groups[i], group_count()));
    }
  }
  ranges_.clear();
  if (group_count() == 1) return absl::OkStatus();
  // Parameter p covers its elements and any gap or padding up to the next
  // one (or its unit's end), so the ranges tile the whole flat buffer.
  for (const Unit& u : layout.units()) {
    for (int p = u.first_param; p < u.end_param; ++p) {
      const size_t begin = layout.params()[p].offset;
      const size_t end = p + 1 < u.end_param ? layout.params()[p + 1].offset : u.offset + u.padded;
      const int group = param_groups[p];
      if (!ranges_.empty() && ranges_.back().group == group && ranges_.back().end == begin) {
        ranges_.back().end = end;
      } else {
        ranges_.push_back({begin, end, group});
      }
    }
  }
  return absl::OkStatus();
}

template <class StepFn>
absl::Status GroupedOptimizer::Split(const StepArgs& args, StepFn step) const {
  const size_t begin = args.first_element, end = begin + args.params.size();
  const size_t grad_size = SizeOf(args.grad_dtype), copy_size = SizeOf(args.copy_dtype);
  // One part of the slice, flat elements [from, to), stepped with group `group`'s optimizer.
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
                                [](size_t e, const Range& r) { return e < r.end; });
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
