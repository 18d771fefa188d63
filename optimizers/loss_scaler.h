// Dynamic loss scaling for fp16 training, as DeepSpeed's DynamicLossScaler
// (with hysteresis) and torch.amp.GradScaler (hysteresis = 1) do it, plus the
// inf/NaN check that feeds it. A LossScaler is a plain value: not thread-safe;
// the engine owns one and agrees on `overflow` across ranks before Update.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace zero {

// Defaults are DeepSpeed's fp16 ones.
struct LossScalerConfig {
  double initial_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 1000;  // consecutive good steps before growing
  int hysteresis = 2;              // overflows tolerated before backing off
  double min_scale = 1.0;
  // DeepSpeed's consecutive_hysteresis: any good step restores the tolerance
  // (otherwise only a growth does).
  bool consecutive_hysteresis = false;
  // DeepSpeed's raise_error_at_min_scale: an overflow that would back off a
  // scale already at min_scale is an error (the run cannot make progress)
  // instead of a skipped step, again and again.
  bool raise_error_at_min_scale = true;
};

class LossScaler {
 public:
  // What a checkpoint needs to resume the schedule exactly.
  struct State {
    double scale;
    int64_t good_steps;   // since the last overflow or growth
    int hysteresis_left;  // overflows still tolerated at this scale
  };

  // InvalidArgument unless 0 < min_scale <= initial_scale (finite),
  // growth_factor >= 1, 0 < backoff_factor <= 1, growth_interval >= 1 and
  // hysteresis >= 1.
  static absl::StatusOr<LossScaler> Create(const LossScalerConfig& config = {});

  // Records one step's outcome; returns true when the step must be skipped
  // (its gradients overflowed).
  bool Update(bool overflow);
  // Before Update: FailedPrecondition when this outcome would back off a
  // scale already at min_scale and raise_error_at_min_scale is set.
  absl::Status CheckProgress(bool overflow) const;

  double scale() const { return state_.scale; }
  // The StepArgs::grad_scale that undoes the scaling.
  float inverse_scale() const { return static_cast<float>(1.0 / state_.scale); }
  State state() const { return state_; }
  // The state, brought within this config (the caller's hyper-parameters,
  // which may have changed since it was saved): a scale below min_scale is
  // raised to it, counters past growth_interval or hysteresis are cut to
  // them. InvalidArgument, naming the field, when no scaler can have had it
  // (a scale that is not finite and positive, a negative counter).
  absl::Status Restore(const State& state);

 private:
  explicit LossScaler(const LossScalerConfig& config);

  LossScalerConfig config_;
  State state_;
};

// True when any element is an infinity or a NaN. Host memory; vectorized and
// split over the CPU pool (compute/parallel.h).
bool HasInfOrNan(std::span<const float> x);
bool HasInfOrNan(std::span<const bf16> x);
bool HasInfOrNan(std::span<const f16> x);
// The same over `count` elements of a run-time dtype; InvalidArgument for an
// invalid dtype or null data.
absl::StatusOr<bool> AnyInfOrNan(const void* data, DType dtype, size_t count);

}  // namespace zero
