// The untyped pointers of a StepArgs, as the CPU loops and CUDA kernels take them.
#pragma once

#include "compute/elementwise.h"
#include "optimizers/optimizer.h"

namespace zero {

inline RawLanes LanesOf(const StepArgs& args) {
  return {args.params.data(), args.grads, args.state.size() > 0 ? args.state[0].data() : nullptr,
          args.state.size() > 1 ? args.state[1].data() : nullptr, args.param_copy};
}

}  // namespace zero
