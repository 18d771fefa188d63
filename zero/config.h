// What a training run asks of the engine. Defaults follow DeepSpeed's.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "optimizers/dtype.h"

namespace zero {

struct EngineConfig {
  // 0: data parallel (all-reduce); 1: + optimizer state sharded; 2: +
  // gradients sharded; 3: + parameters sharded.
  int stage = 0;
  // Micro-batches per optimizer step.
  int gradient_accumulation_steps = 1;
  // Elements per reduction bucket (DeepSpeed's reduce_bucket_size, 5e8).
  // Parameters are grouped into units of about this size, in order; a unit
  // is reduced as soon as backward has produced all of its gradients.
  size_t bucket_elements = 500'000'000;
  // Model parameter and gradient dtype (fp32 master weights either way).
  DType param_dtype = DType::kF32;
};

absl::Status ValidateConfig(const EngineConfig& config);

}  // namespace zero
