#include "optimizers/adam.h"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "optimizers/adam_rule.h"
#include "optimizers/cpu/run.h"
#include "optimizers/cuda/launch.h"
#include "optimizers/hyper_params.h"

namespace zero {
namespace {

absl::Status ValidateConfig(const AdamConfig& c) {
  if (absl::Status s = CheckNonNegative("lr", c.lr); !s.ok()) return s;
  if (absl::Status s = CheckNonNegative("eps", c.eps); !s.ok()) return s;
  if (absl::Status s = CheckNonNegative("weight_decay", c.weight_decay); !s.ok()) return s;
  if (absl::Status s = CheckUnitInterval("beta1", c.beta1); !s.ok()) return s;
  return CheckUnitInterval("beta2", c.beta2);
}

}  // namespace

// torch computes these in Python doubles and hands them to fp32 kernels as
// scalars, which rounds each once; so do we.
AdamScalars MakeAdamScalars(const AdamConfig& c, int64_t step_count, float grad_scale) {
  const double step = static_cast<double>(step_count);
  const double bias_correction1 = 1.0 - std::pow(c.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(c.beta2, step);
  const double step_size = c.lr / bias_correction1;
  const double bc2_sqrt = std::pow(bias_correction2, 0.5);  // Python's `** 0.5` is pow
  const float weight = static_cast<float>(1.0 - c.beta1);
  const bool small = std::fabs(weight) < 0.5f;
  const bool has_wd = c.weight_decay != 0.0;
  return AdamScalars{
      .grad_scale = c.maximize ? -grad_scale : grad_scale,
      .decay = has_wd && c.decoupled_weight_decay ? static_cast<float>(1.0 - c.lr * c.weight_decay)
                                                  : 1.0f,
      .l2 = has_wd && !c.decoupled_weight_decay,
      .weight_decay = static_cast<float>(c.weight_decay),
      .lerp_small = small,
      .lerp_coeff = small ? weight : -(1.0f - weight),  // -0 when weight is 1, as torch's sign
      .beta2 = static_cast<float>(c.beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - c.beta2),
      .bc2_sqrt = static_cast<float>(bc2_sqrt),
      .eps = static_cast<float>(c.eps),
      .neg_step_size = static_cast<float>(-step_size),
  };
}

namespace {

class AdamOptimizer final : public Optimizer {
 public:
  explicit AdamOptimizer(const AdamConfig& config) : config_(config) {}

  std::string_view name() const override {
    return config_.decoupled_weight_decay ? "adamw" : "adam";
  }
  int state_buffers() const override { return 2; }

  double lr() const override { return config_.lr; }

 private:
  HostStep DoBindHostStep(const StepArgs& args) const override {
    return [scalars = ScalarsFor(args), kept = KeptStepArgs(args)]() mutable {
      cpu::RunAdam(scalars, kept.args());
    };
  }
  absl::Status DoStepCuda(const StepArgs& args, void* stream) override {
    return cuda::StepAdam(ScalarsFor(args), args, stream);
  }
  AdamScalars ScalarsFor(const StepArgs& args) const {
    AdamScalars s = MakeAdamScalars(config_, args.step, args.grad_scale);
    s.grad_scale_at = args.grad_scale_at;
    return s;
  }
  void DoSetLr(double lr) override { config_.lr = lr; }

  AdamConfig config_;
};

}  // namespace

AdamConfig AdamWDefaults() {
  AdamConfig c;
  c.weight_decay = 1e-2;
  c.decoupled_weight_decay = true;
  return c;
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeAdam(const AdamConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  return std::unique_ptr<Optimizer>(new AdamOptimizer(config));
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeAdamW(AdamConfig config) {
  config.decoupled_weight_decay = true;
  return MakeAdam(config);
}

}  // namespace zero
