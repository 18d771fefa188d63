#include "memory/cuda/current_device.h"

#include "memory/cuda/driver_api.h"

namespace zero::cuda {
namespace {

// True when the primary context of `ordinal` exists already, so making the
// card current again creates nothing.
bool PrimaryContextActive(const DriverApi& api, int ordinal) {
  CUdevice dev = 0;
  unsigned flags = 0;
  int active = 0;
  return api.DeviceGet(&dev, ordinal) == CUDA_SUCCESS &&
         api.DevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active != 0;
}

}  // namespace

ScopedDevice::ScopedDevice(int ordinal) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
  }
  if (ordinal < 0 || ordinal == previous_) return;
  if (absl::StatusOr<const DriverApi*> api = GetDriverApi(); api.ok()) {
    (void)(*api)->CtxGetCurrent(&previous_context_);
  }
  status_ = cudaSetDevice(ordinal);
  changed_ = status_ == cudaSuccess;
  if (!changed_) (void)cudaGetLastError();
}

ScopedDevice::~ScopedDevice() {
  if (!changed_) return;
  absl::StatusOr<const DriverApi*> api = GetDriverApi();
  if (!api.ok()) return;
  // The caller's own context (primary or not) goes back exactly.
  if (previous_context_ != nullptr) {
    (void)(*api)->CtxSetCurrent(previous_context_);
    return;
  }
  // The caller had none yet: the runtime would make `previous_` current on
  // its next call; do that now only if it costs no new context.
  if (previous_ >= 0 && PrimaryContextActive(**api, previous_)) {
    (void)cudaSetDevice(previous_);
  } else {
    (void)(*api)->CtxSetCurrent(nullptr);
  }
}

int ScopedDevice::OrdinalOf(cudaStream_t stream) {
  if (stream == nullptr) return -1;
  int ordinal = -1;
  if (cudaStreamGetDevice(stream, &ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return ordinal;
}

}  // namespace zero::cuda
