// Hyper-parameter checks shared by the optimizer factories, with torch's
// wording ("Invalid learning rate: -1").
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace zero {

// InvalidArgument unless 0 <= value < infinity (NaN fails).
absl::Status CheckNonNegative(std::string_view name, double value);
// InvalidArgument unless 0 <= value < 1.
absl::Status CheckUnitInterval(std::string_view name, double value);

}  // namespace zero
