// A rule with AdamW's memory traffic (read p, g, m, v; write p, m, v and the
// optional copy) and trivial arithmetic. It is one of the two ceilings the
// optimizer is measured against (bench/optimizer_bench.cc): it runs through
// the same loop, SIMD level and threads as the real rules (touch_limit.h), so
// only the arithmetic differs. It lives here, not in optimizers/, because
// only the benchmark uses it.
#pragma once

#include "base/host_device.h"

namespace zero {

struct TouchScalars {};

template <class Ops>
struct TouchKernel {
  using V = typename Ops::V;
  using Scalars = TouchScalars;
  static constexpr int kStates = 2;

  ZERO_HD explicit TouchKernel(const TouchScalars&) {}

  ZERO_HD ZERO_INLINE void operator()(V& p, V g, V& m, V& v) const {
    m = Ops::Add(m, g);
    v = Ops::Add(v, g);
    p = Ops::Add(p, g);
  }
};

}  // namespace zero
