#include "memory/stream_delay.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace zero {
namespace {

// SplitMix64: a full-period generator whose outputs also mix seeds well.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr int64_t kMaxDelayUs = 1'000'000;

}  // namespace

absl::StatusOr<HostStreamOptions> ParseHostStreamDelay(std::string_view text) {
  HostStreamOptions options;
  if (text.empty() || text == "off") return options;
  const std::vector<std::string> parts = absl::StrSplit(std::string(text), ':');
  int64_t max_us = absl::ToInt64Microseconds(kDefaultMaxHostStreamDelay);
  const bool seed_ok = parts.size() <= 2 && absl::SimpleAtoi(parts[0], &options.delay_seed);
  const bool max_ok = parts.size() == 1 || (absl::SimpleAtoi(parts[1], &max_us) &&
                                            max_us > 0 && max_us <= kMaxDelayUs);
  if (!seed_ok || !max_ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "host stream delay '%s': expected SEED[:MAX_US] with SEED an unsigned integer and "
        "MAX_US from 1 to %d, or 'off'",
        std::string(text), kMaxDelayUs));
  }
  options.max_delay = absl::Microseconds(max_us);
  return options;
}

absl::StatusOr<HostStreamOptions> HostStreamDelayFromEnvironment() {
  const char* env = std::getenv(kHostStreamDelayVariable);
  absl::StatusOr<HostStreamOptions> options = ParseHostStreamDelay(env != nullptr ? env : "");
  if (!options.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("$", kHostStreamDelayVariable, ": ", options.status().message()));
  }
  return options;
}

DelaySequence::DelaySequence(const HostStreamOptions& options, int device, int index)
    : min_ns_(absl::ToInt64Nanoseconds(options.min_delay)), span_ns_(0) {
  uint64_t mix = (uint64_t(uint32_t(device)) << 32) | uint32_t(index);
  state_ = options.delay_seed ^ SplitMix64(mix);
  if (options.delayed()) {
    const int64_t max_ns = absl::ToInt64Nanoseconds(options.max_delay);
    if (min_ns_ > max_ns) min_ns_ = max_ns;
    span_ns_ = uint64_t(max_ns - min_ns_) + 1;
  }
}

absl::Duration DelaySequence::Next() {
  if (span_ns_ == 0) return absl::ZeroDuration();
  return absl::Nanoseconds(min_ns_ + int64_t(SplitMix64(state_) % span_ns_));
}

}  // namespace zero
