// Fused optimizer kernels: one pass reads params, grads and state and writes
// params, state and the optional copy. The update rules are the CPU's own
// (adam_rule.h, sgd_rule.h), over the arithmetic policy of cuda/ops.h.
#include <cuda_runtime_api.h>

#include "compute/cuda/grid.h"
#include "compute/cuda/ops.h"
#include "memory/cuda/current_device.h"
#include "optimizers/cuda/kernels.h"

namespace zero::cuda::internal {
namespace {

template <class Kernel, class G, class C>
__global__ void RangeKernel(typename Kernel::Scalars scalars, RawLanes raw, size_t n) {
  const Kernel kernel(scalars);
  const Lanes<G, C> io = Typed<G, C>(raw);
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    ApplyAt<Ops>(kernel, io, i);
  }
}

template <template <class> class K>
int Launch(const typename K<Ops>::Scalars& s, const RawLanes& lanes, DType grad, int copy_slot,
           size_t n, void* stream) {
  if (n == 0) return cudaSuccess;
  const auto st = static_cast<cudaStream_t>(stream);
  const ScopedDevice on(ScopedDevice::OrdinalOf(st));  // launch on the stream's card
  if (on.status() != cudaSuccess) return on.status();
  // The check after the launch reads the thread's last error: one an earlier
  // call left (already returned to its caller) must not pass for this
  // launch's. A sticky error comes back anyway.
  (void)cudaGetLastError();
  VisitGradCopy(grad, copy_slot, [&]<class G, class C>() {
    RangeKernel<K<Ops>, G, C><<<BlocksFor(n), kThreads, 0, st>>>(s, lanes, n);
  });
  return cudaGetLastError();
}

}  // namespace

int LaunchAdam(const AdamScalars& s, const RawLanes& lanes, DType grad, int copy_slot, size_t n,
               void* stream) {
  return Launch<AdamDynamicKernel>(s, lanes, grad, copy_slot, n, stream);
}

int LaunchSgd(const SgdScalars& s, bool momentum, const RawLanes& lanes, DType grad, int copy_slot,
              size_t n, void* stream) {
  return momentum ? Launch<SgdMomentumKernel>(s, lanes, grad, copy_slot, n, stream)
                  : Launch<SgdPlainKernel>(s, lanes, grad, copy_slot, n, stream);
}

}  // namespace zero::cuda::internal
