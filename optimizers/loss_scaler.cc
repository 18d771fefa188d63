#include "optimizers/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "compute/cpu/run_elementwise.h"

namespace zero {
namespace {

absl::Status ValidateConfig(const LossScalerConfig& c) {
  if (!(c.min_scale > 0.0 && c.min_scale <= c.initial_scale && std::isfinite(c.initial_scale))) {
    return absl::InvalidArgumentError(absl::StrCat("need 0 < min_scale (", c.min_scale,
                                                   ") <= initial_scale (", c.initial_scale, ")"));
  }
  if (!(c.growth_factor >= 1.0 && std::isfinite(c.growth_factor))) {
    return absl::InvalidArgumentError(
        absl::StrCat("growth_factor must be >= 1, got ", c.growth_factor));
  }
  if (!(c.backoff_factor > 0.0 && c.backoff_factor <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff_factor must be in (0, 1], got ", c.backoff_factor));
  }
  if (c.growth_interval < 1 || c.hysteresis < 1) {
    return absl::InvalidArgumentError("growth_interval and hysteresis must be >= 1");
  }
  return absl::OkStatus();
}

}  // namespace

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config), state_{config.initial_scale, 0, config.hysteresis} {}

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalerConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  return LossScaler(config);
}

// DeepSpeed's update_scale: an overflow first spends hysteresis, then backs
// off (never below min_scale; the tolerance is not refilled by backing off).
// growth_interval good steps in a row grow the scale.
bool LossScaler::Update(bool overflow) {
  if (overflow) {
    if (state_.hysteresis_left <= 1) {
      state_.scale = std::max(state_.scale * config_.backoff_factor, config_.min_scale);
    } else {
      --state_.hysteresis_left;
    }
    state_.good_steps = 0;
    return true;
  }
  if (config_.consecutive_hysteresis) state_.hysteresis_left = config_.hysteresis;
  if (++state_.good_steps == config_.growth_interval) {
    state_.good_steps = 0;
    state_.hysteresis_left = config_.hysteresis;
    state_.scale *= config_.growth_factor;
  }
  return false;
}

absl::Status LossScaler::CheckProgress(bool overflow) const {
  if (!overflow || !config_.raise_error_at_min_scale || state_.hysteresis_left > 1 ||
      state_.scale > config_.min_scale) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "the fp16 loss scale is already at its minimum (%g) and the gradients overflow again: the "
      "run cannot make progress (lower min_scale, or set raise_error_at_min_scale to false to "
      "keep skipping steps)",
      config_.min_scale));
}

absl::Status LossScaler::Restore(const State& state) {
  if (!(state.scale > 0 && std::isfinite(state.scale)) || state.good_steps < 0 ||
      state.hysteresis_left < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no loss scaler has the state scale %g, good_steps %d, hysteresis_left %d (a scale must "
        "be finite and positive, good_steps at least 0, hysteresis_left at least 1)",
        state.scale, state.good_steps, state.hysteresis_left));
  }
  state_ = {.scale = std::max(state.scale, config_.min_scale),
            .good_steps = std::min<int64_t>(state.good_steps, config_.growth_interval - 1),
            .hysteresis_left = std::min(state.hysteresis_left, config_.hysteresis)};
  return absl::OkStatus();
}

absl::StatusOr<bool> AnyInfOrNan(const void* data, DType dtype, size_t count) {
  if (!IsValid(dtype)) return absl::InvalidArgumentError("invalid dtype");
  if (count == 0) return false;
  if (data == nullptr) return absl::InvalidArgumentError("data is null");
  return cpu::AnyNonFinite(data, dtype, count);
}

bool HasInfOrNan(std::span<const float> x) {
  return cpu::AnyNonFinite(x.data(), DType::kF32, x.size());
}
bool HasInfOrNan(std::span<const bf16> x) {
  return cpu::AnyNonFinite(x.data(), DType::kBF16, x.size());
}
bool HasInfOrNan(std::span<const f16> x) {
  return cpu::AnyNonFinite(x.data(), DType::kF16, x.size());
}

}  // namespace zero
