// Cards: CUDA virtual memory management over every card of the process.
//
// The driver API is reached through cudaGetDriverEntryPointByVersion, so the
// binary never links libcuda and starts on machines without a driver; there
// CreateCudaBackend returns Unavailable and callers fall back to host devices.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "memory/backend.h"

namespace zero {

// Unavailable when there is no driver or no card; FailedPrecondition when a
// card lacks VMM support or peer access to another.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend();

}  // namespace zero
