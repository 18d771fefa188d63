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
};

// Resolved on first use; Unavailable without a driver.
absl::StatusOr<const DriverApi*> GetDriverApi();

// "cuMemMap: out of memory (2)" for a failed call, OK for CUDA_SUCCESS.
absl::Status DriverStatus(CUresult result, const char* what);
// Same for runtime-API results.
absl::Status RuntimeStatus(int error, const char* what);

}  // namespace zero::cuda
