// The seeded delay mode of host streams: each stream's worker sleeps a
// pseudo-random short time before every operation it runs, so work on two
// streams interleaves in many orders and a missing event wait shows up in CI
// as a wrong result instead of passing by luck.
//
// Deterministic per stream: the sequence of delays depends only on the seed,
// the device and the stream's index on that device (0 is the default stream,
// then streams in the order they were created). Off by default.
//
// From the environment (read by DeviceSystem::Create for host devices when
// the spec sets no delay): ZERO_HOST_STREAM_DELAY=SEED[:MAX_US], e.g. "7"
// (delays up to 100 us) or "7:500"; empty or "off" leaves it off.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zero {

struct HostStreamOptions {
  uint64_t delay_seed = 0;
  // Each delay is drawn uniformly from [min_delay, max_delay]; the mode is on
  // when max_delay > 0.
  absl::Duration min_delay = absl::ZeroDuration();
  absl::Duration max_delay = absl::ZeroDuration();

  bool delayed() const { return max_delay > absl::ZeroDuration(); }
};

inline constexpr char kHostStreamDelayVariable[] = "ZERO_HOST_STREAM_DELAY";
inline constexpr absl::Duration kDefaultMaxHostStreamDelay = absl::Microseconds(100);

// Parses "SEED[:MAX_US]" (MAX_US from 1 to 1000000; default 100), "" or "off".
absl::StatusOr<HostStreamOptions> ParseHostStreamDelay(std::string_view text);
// $ZERO_HOST_STREAM_DELAY parsed; off when unset. Errors name the variable.
absl::StatusOr<HostStreamOptions> HostStreamDelayFromEnvironment();

// The delays of one stream. Not thread-safe: its worker alone draws them.
class DelaySequence {
 public:
  DelaySequence(const HostStreamOptions& options, int device, int index);
  // Zero when the mode is off.
  absl::Duration Next();

 private:
  uint64_t state_;
  int64_t min_ns_;
  uint64_t span_ns_;  // max - min + 1; 0 when off
};

}  // namespace zero
