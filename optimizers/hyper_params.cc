#include "optimizers/hyper_params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace zero {

absl::Status CheckNonNegative(std::string_view name, double value) {
  if (value >= 0.0 && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("Invalid ", std::string(name), " value: ", value));
}

absl::Status CheckUnitInterval(std::string_view name, double value) {
  if (value >= 0.0 && value < 1.0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("Invalid ", std::string(name), " value: ", value, " (must be in [0, 1))"));
}

}  // namespace zero
