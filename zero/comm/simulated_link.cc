#include "zero/comm/simulated_link.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "zero/comm/comm_stats.h"

namespace zero {

absl::Status SimulatedLink::Validate() const {
  if (latency < absl::ZeroDuration() || latency == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "simulated link latency %s must be finite and >= 0", absl::FormatDuration(latency)));
  }
  // Below one byte a second the modelled times leave absl::Duration's
  // range (an infinite sleep that neither Abort nor the timeout ends).
  if (!std::isfinite(bytes_per_second) ||
      (bytes_per_second != 0 && !(bytes_per_second >= 1))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "simulated link bandwidth %g bytes/s must be finite and at least 1 (0: unlimited)",
        bytes_per_second));
  }
  return absl::OkStatus();
}

absl::Duration SimulatedLink::TimeOf(const CollectiveCall& call, int rank, int world_size) const {
  if (bytes_per_second == 0) return latency;
  const OpStats traffic = RingTraffic(call, rank, world_size);
  const uint64_t bytes = std::max(traffic.bytes_sent, traffic.bytes_received);
  // Whole nanoseconds, rounded up: the modelled time is a lower bound.
  return latency +
         absl::Nanoseconds(std::ceil(static_cast<double>(bytes) * 1e9 / bytes_per_second));
}

}  // namespace zero
