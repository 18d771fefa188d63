#include "optimizers/sgd.h"

#include <cmath>
#include <string_view>

#include "optimizers/cpu/run.h"
#include "optimizers/cuda/launch.h"
#include "optimizers/hyper_params.h"
#include "optimizers/sgd_rule.h"

namespace zero {
namespace {

absl::Status ValidateConfig(const SgdConfig& c) {
  if (absl::Status s = CheckNonNegative("lr", c.lr); !s.ok()) return s;
  if (absl::Status s = CheckNonNegative("momentum", c.momentum); !s.ok()) return s;
  if (absl::Status s = CheckNonNegative("weight_decay", c.weight_decay); !s.ok()) return s;
  if (!std::isfinite(c.dampening)) return absl::InvalidArgumentError("Invalid dampening value");
  if (c.nesterov && (c.momentum <= 0.0 || c.dampening != 0.0)) {
    return absl::InvalidArgumentError("Nesterov momentum requires a momentum and zero dampening");
  }
  return absl::OkStatus();
}

SgdScalars MakeScalars(const SgdConfig& c, double lr, const StepArgs& args) {
  return SgdScalars{
      .grad_scale = c.maximize ? -args.grad_scale : args.grad_scale,
      .has_weight_decay = c.weight_decay != 0.0,
      .weight_decay = static_cast<float>(c.weight_decay),
      .first_step = args.step == 1,
      .momentum = static_cast<float>(c.momentum),
      .one_minus_dampening = static_cast<float>(1.0 - c.dampening),
      .nesterov = c.nesterov,
      .neg_lr = static_cast<float>(-lr),
      .grad_scale_at = args.grad_scale_at,
  };
}

class SgdOptimizer final : public Optimizer {
 public:
  explicit SgdOptimizer(const SgdConfig& config) : config_(config) {}

  std::string_view name() const override { return "sgd"; }
  int state_buffers() const override { return has_momentum() ? 1 : 0; }

  double lr() const override { return config_.lr; }

 private:
  HostStep DoBindHostStep(const StepArgs& args) const override {
    return [scalars = MakeScalars(config_, config_.lr, args), momentum = has_momentum(),
            kept = KeptStepArgs(args)]() mutable { cpu::RunSgd(scalars, momentum, kept.args()); };
  }
  absl::Status DoStepCuda(const StepArgs& args, void* stream) override {
    return cuda::StepSgd(MakeScalars(config_, config_.lr, args), has_momentum(), args, stream);
  }
  void DoSetLr(double lr) override { config_.lr = lr; }
  bool has_momentum() const { return config_.momentum != 0.0; }

  SgdConfig config_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> MakeSgd(const SgdConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  return std::unique_ptr<Optimizer>(new SgdOptimizer(config));
}

}  // namespace zero
