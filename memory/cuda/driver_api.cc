#include "memory/cuda/driver_api.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"

namespace zero::cuda {
namespace {

template <typename Fn>
absl::Status Resolve(const char* symbol, int version, Fn* fn) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  void* ptr = nullptr;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &ptr, version, cudaEnableDefault,
                                                     &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || ptr == nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "driver entry point %s (version %d) not found: %s", symbol, version,
        cudaGetErrorString(err)));
  }
  *fn = reinterpret_cast<Fn>(ptr);
  return absl::OkStatus();
}

absl::StatusOr<DriverApi> Load() {
  int count = 0;
  // Initializes the runtime; without a driver this is where we learn it.
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess || count == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "no CUDA card: %s", err == cudaSuccess ? "zero devices" : cudaGetErrorString(err)));
  }
  DriverApi api{};
  absl::Status s[] = {
      Resolve("cuDeviceGet", 2000, &api.DeviceGet),
      Resolve("cuDeviceGetAttribute", 2000, &api.DeviceGetAttribute),
      Resolve("cuMemGetAllocationGranularity", 10020, &api.MemGetAllocationGranularity),
      Resolve("cuMemAddressReserve", 10020, &api.MemAddressReserve),
      Resolve("cuMemAddressFree", 10020, &api.MemAddressFree),
      Resolve("cuMemCreate", 10020, &api.MemCreate),
      Resolve("cuMemMap", 10020, &api.MemMap),
      Resolve("cuMemUnmap", 10020, &api.MemUnmap),
      Resolve("cuMemRelease", 10020, &api.MemRelease),
      Resolve("cuMemSetAccess", 10020, &api.MemSetAccess),
      Resolve("cuGetErrorString", 6000, &api.GetErrorString),
  };
  for (const absl::Status& status : s) {
    if (!status.ok()) return status;
  }
  return api;
}

}  // namespace

absl::StatusOr<const DriverApi*> GetDriverApi() {
  static const absl::StatusOr<DriverApi>* api = new absl::StatusOr<DriverApi>(Load());
  if (!api->ok()) return api->status();
  return &**api;
}

absl::Status DriverStatus(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* text = "unknown error";
  if (absl::StatusOr<const DriverApi*> api = GetDriverApi(); api.ok()) {
    (*api)->GetErrorString(result, &text);
  }
  const std::string message = absl::StrFormat("%s: %s (%d)", what, text, static_cast<int>(result));
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status RuntimeStatus(int error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrFormat(
      "%s: %s (%d)", what, cudaGetErrorString(static_cast<cudaError_t>(error)), error);
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace zero::cuda
