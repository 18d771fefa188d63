// Cards: CUDA virtual memory management over the cards this process uses.
//
// The driver API is reached through cudaGetDriverEntryPointByVersion, so the
// binary never links libcuda and starts on machines without a driver; there
// CreateCudaBackend returns Unavailable and `auto` falls back to host devices.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/backend.h"

namespace zero {

// Device i of the backend is card `ordinals[i]` (empty: every visible card).
// Only those cards get a context; the caller's current card is restored.
// Unavailable when there is no driver or no card; FailedPrecondition for a
// driver too old for this runtime, a card without VMM support or without
// peer access to another used card; InvalidArgument for a card that is not
// there; Internal for any other CUDA error.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const std::vector<int>& ordinals = {});

}  // namespace zero
