// The Adam / AdamW update of one element, or one SIMD vector of elements.
// Written once over an arithmetic policy `Ops` (cpu/ops_*.h, cuda/kernels.cu)
// so the scalar, AVX2, AVX-512 and CUDA paths perform the same IEEE
// operations in the same order and agree bit for bit. The order is torch's
// single-tensor Adam (torch/optim/adam.py, foreach=False), unfused.
#pragma once

#include "base/host_device.h"
#include "optimizers/grad_scale.h"

namespace zero {

// Per-step constants, each rounded once to fp32 from the double that torch
// computes in Python. Filled by adam.cc.
struct AdamScalars {
  float grad_scale;  // negated when maximizing
  float decay;       // AdamW: 1 - lr * weight_decay; otherwise exactly 1
  bool l2;           // Adam with weight decay: g += weight_decay * p
  float weight_decay;
  bool lerp_small;   // torch's lerp picks its formula by |weight| < 0.5
  float lerp_coeff;  // weight = 1 - beta1 when small, else -(1 - weight)
  float beta2;
  float one_minus_beta2;
  float bc2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
  const float* grad_scale_at = nullptr;  // StepArgs::grad_scale_at
};

// A choice in the update is fixed at compile time (0 or 1), or kDynamic:
// made per call by a select on a loop-invariant mask. The CPU instantiates
// every fixed combination (fewer operations and registers in its hot loop);
// the CUDA kernel, where selects cost nothing that matters, uses kDynamic.
inline constexpr int kDynamic = -1;

template <class Ops, int kChoice>
ZERO_HD ZERO_INLINE typename Ops::V Choose(typename Ops::M mask, typename Ops::V if_set,
                                           typename Ops::V if_clear) {
  if constexpr (kChoice == 1) {
    return if_set;
  } else if constexpr (kChoice == 0) {
    return if_clear;
  } else {
    return Ops::Select(mask, if_set, if_clear);
  }
}

// kL2: g += weight_decay * p. kLerpSmall: which lerp formula. kDivideByBc2:
// 0 for steps where bc2_sqrt is exactly 1 (with beta2 = 0.999, from step 16628
// on: most of a run); dividing by 1 is exact, so skipping it changes no bit,
// and the divider is the CPU's bottleneck.
template <class Ops, int kL2, int kLerpSmall, int kDivideByBc2>
struct AdamKernelT {
  using V = typename Ops::V;
  using M = typename Ops::M;
  using Scalars = AdamScalars;
  static constexpr int kStates = 2;  // exp_avg, exp_avg_sq

  ZERO_HD explicit AdamKernelT(const AdamScalars& s)
      : grad_scale(Ops::Set(GradScaleOf(s))),
        decay(Ops::Set(s.decay)),
        weight_decay(Ops::Set(s.weight_decay)),
        lerp_coeff(Ops::Set(s.lerp_coeff)),
        beta2(Ops::Set(s.beta2)),
        one_minus_beta2(Ops::Set(s.one_minus_beta2)),
        bc2_sqrt(Ops::Set(s.bc2_sqrt)),
        eps(Ops::Set(s.eps)),
        neg_step_size(Ops::Set(s.neg_step_size)),
        l2(Ops::MaskOf(s.l2)),
        lerp_small(Ops::MaskOf(s.lerp_small)),
        divide(Ops::MaskOf(s.bc2_sqrt != 1.0f)) {}

  ZERO_HD ZERO_INLINE void operator()(V& p, V g, V& m, V& v) const {
    g = Ops::Mul(g, grad_scale);
    // param.mul_(1 - lr*wd). torch skips it without decoupled decay; p * 1 is
    // p bit for bit (a NaN is quieted, as the final add would quiet it).
    p = Ops::Mul(p, decay);
    // grad.add(param, alpha=weight_decay)
    g = Choose<Ops, kL2>(l2, Ops::Add(g, Ops::Mul(weight_decay, p)), g);
    // exp_avg.lerp_(grad, w): small w: m + w*(g - m); else g - (g - m)*(1 - w),
    // which equals g + (-(1 - w))*(g - m) exactly, signed zeros included
    // (negation is exact and x - y is x + -y).
    m = Ops::Add(Choose<Ops, kLerpSmall>(lerp_small, m, g), Ops::Mul(lerp_coeff, Ops::Sub(g, m)));
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    v = Ops::Add(Ops::Mul(v, beta2), Ops::Mul(Ops::Mul(one_minus_beta2, g), g));
    V root = Ops::Sqrt(v);  // denom = sqrt(v) / bc2_sqrt + eps
    if constexpr (kDivideByBc2 != 0) {
      root = Choose<Ops, kDivideByBc2>(divide, Ops::Div(root, bc2_sqrt), root);
    }
    const V denom = Ops::Add(root, eps);
    p = Ops::Add(p, Ops::Div(Ops::Mul(neg_step_size, m), denom));  // addcdiv_(m, denom, -step)
  }

  V grad_scale, decay, weight_decay, lerp_coeff, beta2, one_minus_beta2, bc2_sqrt, eps,
      neg_step_size;
  M l2, lerp_small, divide;
};

// The fixed-choice kernels the CPU builds, indexed by AdamVariant().
inline constexpr int kNumAdamVariants = 8;
ZERO_HD constexpr int AdamVariant(const AdamScalars& s) {
  return (s.l2 ? 4 : 0) | (s.lerp_small ? 2 : 0) | (s.bc2_sqrt != 1.0f ? 1 : 0);
}
template <int kVariant>
struct AdamVariantKernel {
  template <class Ops>
  using type = AdamKernelT<Ops, (kVariant >> 2) & 1, (kVariant >> 1) & 1, kVariant & 1>;
};

template <class Ops>
using AdamDynamicKernel = AdamKernelT<Ops, kDynamic, kDynamic, kDynamic>;

}  // namespace zero
