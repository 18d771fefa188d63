// The scale an update rule (adam_rule.h, sgd_rule.h) multiplies gradients
// by: a value fixed on the host, or one read from (device) memory when the
// rule is built (per CPU chunk, per CUDA thread), never when it is
// enqueued, so an earlier kernel on the stream may compute it.
#pragma once

#include "base/host_device.h"

namespace zero {

// With a pointer the value is +-1 (negated when maximizing), so the product
// is *grad_scale_at or its negation, exactly.
template <class Scalars>
ZERO_HD ZERO_INLINE float GradScaleOf(const Scalars& s) {
  return s.grad_scale_at != nullptr ? s.grad_scale * *s.grad_scale_at : s.grad_scale;
}

}  // namespace zero
