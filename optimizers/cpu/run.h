// Runs an update rule over a whole StepArgs on the CPU: the active SIMD level
// (cpu/isa.h), all threads of the pool (parallel.h). Arguments must already be
// validated (ValidateStepArgs). Blocks until done.
#pragma once

#include <cstddef>

#include "base/dtype.h"
#include "optimizers/adam_rule.h"
#include "optimizers/optimizer.h"
#include "optimizers/sgd_rule.h"

namespace zero::cpu {

void RunAdam(const AdamScalars& scalars, const StepArgs& args);
// `momentum` picks the rule with one state buffer (args.state[0]).
void RunSgd(const SgdScalars& scalars, bool momentum, const StepArgs& args);

}  // namespace zero::cpu
