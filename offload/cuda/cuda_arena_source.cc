#include "offload/cuda/cuda_arena_source.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "base/units.h"
#include "memory/cuda/driver_api.h"

namespace zero {
namespace {

class CudaHostArenaSource final : public ArenaSource {
 public:
  std::string_view name() const override { return "cudaHostAlloc"; }
  bool has_bytes() const override { return true; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // the runtime remembers the error; a later check must not see it
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cudaHostAlloc could not pin a %s host arena", FormatBytes(bytes)));
    }
    if (err != cudaSuccess) return cuda::RuntimeStatus(err, "cudaHostAlloc");
    return p;
  }

  void Free(void* base, size_t) override { cudaFreeHost(base); }
};

}  // namespace

std::unique_ptr<ArenaSource> CreateCudaHostArenaSource() {
  return std::make_unique<CudaHostArenaSource>();
}

}  // namespace zero
