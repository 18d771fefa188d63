// The few driver-API entry points the VMM backend needs, resolved once at
// run time (no link against libcuda).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "absl/status/statusor.h"

namespace zero::cuda {

struct DriverApi {
  PFN_cuDeviceGet_v2000 DeviceGet;
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute;
  PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
  PFN_cuMemAddressReserve_v10020 MemAddressReserve;
  PFN_cuMemAddressFree_v10020 MemAddressFree;
  PFN_cuMemCreate_v10020 MemCreate;
  PFN_cuMemMap_v10020 MemMap;
  PFN_cuMemUnmap_v10020 MemUnmap;
  PFN_cuMemRelease_v10020 MemRelease;
  PFN_cuMemSetAccess_v10020 MemSetAccess;
  PFN_cuGetErrorString_v6000 GetErrorString;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent;
  PFN_cuCtxSetCurrent_v4000 CtxSetCurrent;
  PFN_cuDevicePrimaryCtxGetState_v7000 DevicePrimaryCtxGetState;
};

// Resolved on first use; the error of ClassifyCudaStart otherwise.
absl::StatusOr<const DriverApi*> GetDriverApi();

// What the runtime's first call (cudaGetDeviceCount: `count_error`, `count`)
// means, given cudaDriverGetVersion (0: no driver) and the runtime's version:
// Unavailable only for "no driver" and "no card" (callers may fall back to
// host devices); FailedPrecondition for a driver too old for this runtime;
// Internal for any other error. Pure, so it is tested without a card.
absl::Status ClassifyCudaStart(int count_error, int count, int driver_version,
                               int runtime_version);

// "cuMemMap: out of memory (2)" for a failed call, OK for CUDA_SUCCESS.
absl::Status DriverStatus(CUresult result, const char* what);
// Same for runtime-API results.
absl::Status RuntimeStatus(int error, const char* what);

}  // namespace zero::cuda
