#include "offload/cuda/cuda_arena_source.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "base/units.h"
#include "memory/cuda/current_device.h"
#include "memory/cuda/driver_api.h"

namespace zero {
namespace {

class CudaHostArenaSource final : public ArenaSource {
 public:
  explicit CudaHostArenaSource(int ordinal) : ordinal_(ordinal) {}
  std::string_view name() const override { return "cudaHostAlloc"; }
  bool has_bytes() const override { return true; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    const cuda::ScopedDevice on(ordinal_);
    if (on.status() != cudaSuccess) return cuda::RuntimeStatus(on.status(), "cudaSetDevice");
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

  void Free(void* base, size_t) override {
    const cuda::ScopedDevice on(ordinal_);
    cudaFreeHost(base);
  }

 private:
  const int ordinal_;
};

}  // namespace

std::unique_ptr<ArenaSource> CreateCudaHostArenaSource(int ordinal) {
  return std::make_unique<CudaHostArenaSource>(ordinal);
}

}  // namespace zero
