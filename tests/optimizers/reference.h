// torch.optim's update formulas written out plainly, one element at a time,
// as the test oracle. Hyper-parameter math in double (torch does it in
// Python), tensor math in fp32 in torch's op order. Deliberately independent
// of optimizers/*_rule.h: the lerp here is torch's own two-branch formula.
// Built with -ffp-contract=off like the library.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "optimizers/adam.h"
#include "optimizers/sgd.h"
#include "tests/optimizers/test_util.h"

namespace zero::testing {

// torch.lerp(self, end, weight) on the CPU (ATen/native/Lerp.h, scalar path).
inline float TorchLerp(float self, float end, float weight) {
  return std::fabs(weight) < 0.5f ? self + weight * (end - self)
                                  : end - (end - self) * (1.0f - weight);
}

// One step of torch.optim.Adam/AdamW (_single_tensor_adam) over a Problem.
inline void ReferenceAdamStep(const AdamConfig& c, int64_t step, float grad_scale, Problem& p) {
  const double bias_correction1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(c.beta2, static_cast<double>(step));
  const double step_size = c.lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  for (size_t i = 0; i < p.size(); ++i) {
    float& param = p.params[i];
    float& exp_avg = p.state[0][i];
    float& exp_avg_sq = p.state[1][i];
    float grad = DecodeAt(p.grads.data(), p.grad_dtype, i) * grad_scale;
    if (c.maximize) grad = -grad;
    if (c.weight_decay != 0.0) {
      if (c.decoupled_weight_decay) {
        param *= static_cast<float>(1.0 - c.lr * c.weight_decay);
      } else {
        grad = grad + static_cast<float>(c.weight_decay) * param;
      }
    }
    exp_avg = TorchLerp(exp_avg, grad, static_cast<float>(1.0 - c.beta1));
    exp_avg_sq =
        exp_avg_sq * static_cast<float>(c.beta2) + static_cast<float>(1.0 - c.beta2) * grad * grad;
    const float denom = std::sqrt(exp_avg_sq) / static_cast<float>(bias_correction2_sqrt) +
                        static_cast<float>(c.eps);
    param = param + static_cast<float>(-step_size) * exp_avg / denom;
  }
}

// One step of torch.optim.SGD (_single_tensor_sgd) over a Problem.
inline void ReferenceSgdStep(const SgdConfig& c, int64_t step, float grad_scale, Problem& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    float& param = p.params[i];
    float grad = DecodeAt(p.grads.data(), p.grad_dtype, i) * grad_scale;
    if (c.maximize) grad = -grad;
    if (c.weight_decay != 0.0) grad = grad + static_cast<float>(c.weight_decay) * param;
    if (c.momentum != 0.0) {
      float& buf = p.state[0][i];
      if (step == 1) {
        buf = grad;
      } else {
        buf = buf * static_cast<float>(c.momentum) + static_cast<float>(1.0 - c.dampening) * grad;
      }
      grad = c.nesterov ? grad + static_cast<float>(c.momentum) * buf : buf;
    }
    param = param + static_cast<float>(-c.lr) * grad;
  }
}

inline void ReferenceStep(const AnyConfig& config, int64_t step, float grad_scale, Problem& p) {
  if (const auto* adam = std::get_if<AdamConfig>(&config)) {
    ReferenceAdamStep(*adam, step, grad_scale, p);
  } else {
    ReferenceSgdStep(std::get<SgdConfig>(config), step, grad_scale, p);
  }
}

// Writes p.copy from p.params the way torch's .to(dtype) rounds (RNE).
inline void ReferenceCopy(Problem& p) {
  if (!p.copy_dtype) return;
  p.copy = Encode(p.params, *p.copy_dtype);
}

}  // namespace zero::testing
