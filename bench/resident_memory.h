// The process's resident memory, for checks that a code path stays within a
// memory budget by measurement rather than by its own accounting (the
// checkpoint bench, the streaming-load test). Linux (/proc/self/statm).
#pragma once

#include <cstdint>
#include <functional>

namespace zero {

// Resident bytes now.
uint64_t ResidentBytes();

// The most the resident size rose above its value at the call while `fn`
// ran, sampled every half millisecond from another thread (and once after).
uint64_t PeakResidentGrowth(const std::function<void()>& fn);

}  // namespace zero
