#include "optimizers/optimizer.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compute/on_device.h"
#include "optimizers/hyper_params.h"

namespace zero {

absl::Status ValidateStepArgs(const StepArgs& args, int state_buffers) {
  const size_t n = args.params.size();
  if (!IsValid(args.grad_dtype)) return absl::InvalidArgumentError("invalid grad_dtype");
  if (n > 0 && args.grads == nullptr) return absl::InvalidArgumentError("grads is null");
  if (args.step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("step must be >= 1, got ", args.step));
  }
  if (!std::isfinite(args.grad_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("grad_scale is not finite: ", args.grad_scale));
  }
  if (reinterpret_cast<uintptr_t>(args.grad_scale_at) % alignof(float) != 0) {
    return absl::InvalidArgumentError("grad_scale_at is not 4-byte aligned");
  }
  if (args.state.size() != static_cast<size_t>(state_buffers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", state_buffers, " state buffers, got ", args.state.size()));
  }
  for (size_t i = 0; i < args.state.size(); ++i) {
    if (args.state[i].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("state buffer ", i, " has ", args.state[i].size(), " elements, params ", n));
    }
    if (n > 0 && args.state[i].data() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("state buffer ", i, " is null"));
    }
  }
  if (args.param_copy != nullptr && !IsValid(args.copy_dtype)) {
    return absl::InvalidArgumentError("invalid copy_dtype");
  }
  return absl::OkStatus();
}

absl::Status Optimizer::Step(const StepArgs& args) {
  absl::StatusOr<HostStep> step = BindHostStep(args);
  if (!step.ok()) return step.status();
  std::move (*step)();
  return absl::OkStatus();
}

absl::StatusOr<HostStep> Optimizer::BindHostStep(const StepArgs& args) const {
  if (absl::Status s = ValidateStepArgs(args, state_buffers()); !s.ok()) return s;
  return DoBindHostStep(args);
}

absl::Status Optimizer::Step(const StepArgs& args, DeviceKind kind, Stream* stream,
                             absl::AnyInvocable<bool()> wanted) {
  if (stream == nullptr) return absl::InvalidArgumentError("optimizer step: stream is null");
  if (absl::Status s = ValidateStepArgs(args, state_buffers()); !s.ok()) return s;
  if (kind != DeviceKind::kHost) {
    return RunOnDevice(kind, *stream, [] {}, [&](int /*device*/, void* native) {
      return DoStepCuda(args, native);
    });
  }
  return RunOnDevice(
      kind, *stream,
      [step = DoBindHostStep(args), wanted = std::move(wanted)]() mutable {
        if (!wanted || wanted()) std::move(step)();
      },
      [](int, void*) { return absl::OkStatus(); });
}

absl::Status Optimizer::StepCuda(const StepArgs& args, void* stream) {
  if (absl::Status s = ValidateStepArgs(args, state_buffers()); !s.ok()) return s;
  return DoStepCuda(args, stream);
}

absl::Status Optimizer::set_lr(double lr) {
  if (absl::Status s = CheckNonNegative("lr", lr); !s.ok()) return s;
  DoSetLr(lr);
  return absl::OkStatus();
}

}  // namespace zero
