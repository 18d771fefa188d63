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
  // Clip gradients to this global L2 norm (of the averaged gradient); 0: off.
  double max_grad_norm = 0.0;
  // Model parameter and gradient dtype (fp32 master weights either way).
  DType param_dtype = DType::kF32;

  // Stage 3 (DeepSpeed's stage3_* knobs, in elements):
  // how far ahead of the module in use to gather, following the order
  // recorded in the first step (stage3_prefetch_bucket_size);
  size_t prefetch_elements = 50'000'000;
  // a cap on gathered elements alive at once that prefetch respects
  // (stage3_max_live_parameters);
  size_t max_live_elements = 1'000'000'000;
  // a released module whose next fetch comes within this many fetches stays
  // gathered (stage3_max_reuse_distance, counted in fetches here);
  int max_reuse_distance = 0;
  // units smaller than this stay gathered for good (param_persistence_threshold).
  size_t persistence_threshold = 100'000;
};

absl::Status ValidateConfig(const EngineConfig& config);

}  // namespace zero
