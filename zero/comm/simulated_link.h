// A simulated network link for the local backend, so collectives take time
// on host devices (overlap of communication and compute becomes measurable
// there). Each rank's part of a call lasts
//   latency + (this rank's ring-model bytes, comm_stats.h) / bytes_per_second,
// where a rank's bytes are the larger of what it sends and what it receives
// (a full-duplex link). A value type; off (zero time) by default.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "zero/comm/collective.h"

namespace zero {

struct SimulatedLink {
  absl::Duration latency = absl::ZeroDuration();  // per collective, barrier included
  double bytes_per_second = 0;                    // per rank and direction; 0: unlimited

  bool off() const { return latency == absl::ZeroDuration() && bytes_per_second == 0; }
  // InvalidArgument for a negative or infinite latency, or a bandwidth that
  // is negative or not finite.
  absl::Status Validate() const;
  // How long `rank`'s part of `call` takes in a group of `world_size`.
  absl::Duration TimeOf(const CollectiveCall& call, int rank, int world_size) const;
};

}  // namespace zero
