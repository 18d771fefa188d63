// The SGD update (momentum, dampening, Nesterov, weight decay) of one element
// or SIMD vector, over an arithmetic policy `Ops`, in the op order of torch's
// single-tensor SGD (torch/optim/sgd.py, foreach=False). See adam_rule.h.
#pragma once

#include "base/host_device.h"
#include "optimizers/grad_scale.h"

namespace zero {

// Per-step constants rounded once to fp32. Filled by sgd.cc.
struct SgdScalars {
  float grad_scale;       // negated when maximizing
  bool has_weight_decay;  // g += weight_decay * p
  float weight_decay;
  bool first_step;  // the momentum buffer starts as a copy of g
  float momentum;
  float one_minus_dampening;
  bool nesterov;
  float neg_lr;
  const float* grad_scale_at = nullptr;  // StepArgs::grad_scale_at
};

// kMomentum is a type-level choice because it changes the state count (0 or 1).
template <class Ops, bool kMomentum>
struct SgdKernel {
  using V = typename Ops::V;
  using M = typename Ops::M;
  using Scalars = SgdScalars;
  static constexpr int kStates = kMomentum ? 1 : 0;

  ZERO_HD explicit SgdKernel(const SgdScalars& s)
      : grad_scale(Ops::Set(GradScaleOf(s))),
        weight_decay(Ops::Set(s.weight_decay)),
        momentum(Ops::Set(s.momentum)),
        one_minus_dampening(Ops::Set(s.one_minus_dampening)),
        neg_lr(Ops::Set(s.neg_lr)),
        has_weight_decay(Ops::MaskOf(s.has_weight_decay)),
        first_step(Ops::MaskOf(s.first_step)),
        nesterov(Ops::MaskOf(s.nesterov)) {}

  ZERO_HD ZERO_INLINE void operator()(V& p, V g, V& buf, V& /*unused*/) const {
    g = Ops::Mul(g, grad_scale);
    g = Ops::Select(has_weight_decay, Ops::Add(g, Ops::Mul(weight_decay, p)), g);
    if constexpr (kMomentum) {
      // buf = clone(g) on the first step, else buf.mul_(momentum).add_(g, alpha=1-dampening)
      buf = Ops::Select(first_step, g,
                        Ops::Add(Ops::Mul(buf, momentum), Ops::Mul(one_minus_dampening, g)));
      g = Ops::Select(nesterov, Ops::Add(g, Ops::Mul(momentum, buf)), buf);
    }
    p = Ops::Add(p, Ops::Mul(neg_lr, g));  // param.add_(g, alpha=-lr)
  }

  V grad_scale, weight_decay, momentum, one_minus_dampening, neg_lr;
  M has_weight_decay, first_step, nesterov;
};

template <class Ops>
using SgdPlainKernel = SgdKernel<Ops, false>;
template <class Ops>
using SgdMomentumKernel = SgdKernel<Ops, true>;

}  // namespace zero
