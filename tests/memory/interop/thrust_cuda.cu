#include "tests/memory/interop/thrust_cuda.h"

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <new>
#include <string>

#include "memory/interop/thrust_allocator.h"

namespace zero::testing {

absl::StatusOr<uint64_t> SumOnCard(MemoryResource* resource, Stream* stream,
                                   const std::vector<uint64_t>& values) {
  auto native = static_cast<cudaStream_t>(stream->native_handle());
  uint64_t sum = 0;
  try {
    ThrustDeviceAllocator<uint64_t> alloc(resource, stream, Tag::kActivations);
    thrust::device_vector<uint64_t, ThrustDeviceAllocator<uint64_t>> d(values.begin(),
                                                                         values.end(), alloc);
    ThrustAllocator<char> scratch(resource, stream, Tag::kOther);
    sum = thrust::reduce(thrust::cuda::par(scratch).on(native), d.begin(), d.end(), uint64_t{0});
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(e.what());
  } catch (const std::exception& e) {  // thrust::system_error from a CUDA call
    return absl::InternalError(e.what());
  }
  const cudaError_t err = cudaStreamSynchronize(native);
  if (err != cudaSuccess) return absl::InternalError(cudaGetErrorString(err));
  return sum;
}

}  // namespace zero::testing
