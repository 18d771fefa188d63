// Thrust on a card with the pool as its memory (thrust_cuda.cu, built by
// nvcc): the card half of thrust_allocator_test, run by the card check.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/resource.h"
#include "memory/stream.h"

namespace zero::testing {

// Sums `values` on the card that owns `resource`: they live in a
// thrust::device_vector over ThrustDeviceAllocator, the reduction's scratch
// comes from ThrustAllocator<char> through thrust::cuda::par(alloc).on(stream).
// `stream` must be a card stream (native_handle() is its cudaStream_t).
// (A reduction, not a sort: CUB's sort triples this file's nvcc time.)
absl::StatusOr<uint64_t> SumOnCard(MemoryResource* resource, Stream* stream,
                                   const std::vector<uint64_t>& values);

}  // namespace zero::testing
