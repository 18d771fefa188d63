#include "zero/config.h"

#include "absl/strings/str_format.h"

namespace zero {

absl::Status ValidateConfig(const EngineConfig& config) {
  if (config.stage < 0 || config.stage > 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("stage %d is not 0, 1, 2 or 3", config.stage));
  }
  if (config.gradient_accumulation_steps < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gradient_accumulation_steps %d < 1", config.gradient_accumulation_steps));
  }
  if (config.bucket_elements == 0) return absl::InvalidArgumentError("bucket_elements is zero");
  if (config.param_dtype != DType::kF32) {
    return absl::UnimplementedError("mixed precision is not supported yet: use fp32 parameters");
  }
  if (!(config.max_grad_norm >= 0.0)) {
    return absl::InvalidArgumentError("max_grad_norm must be >= 0");
  }
  if (config.max_reuse_distance < 0) {
    return absl::InvalidArgumentError("max_reuse_distance < 0");
  }
  return absl::OkStatus();
}

}  // namespace zero
