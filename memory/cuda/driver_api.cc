#include "memory/cuda/driver_api.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

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

std::string CudaVersion(int version) {
  return absl::StrFormat("%d.%d", version / 1000, version % 1000 / 10);
}

absl::StatusOr<DriverApi> Load() {
  int count = 0;
  // Initializes the runtime; without a driver this is where we learn it.
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) (void)cudaGetLastError();
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  RETURN_IF_ERROR(ClassifyCudaStart(err, count, driver, CUDART_VERSION));
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
      Resolve("cuCtxGetCurrent", 4000, &api.CtxGetCurrent),
      Resolve("cuCtxSetCurrent", 4000, &api.CtxSetCurrent),
      Resolve("cuDevicePrimaryCtxGetState", 7000, &api.DevicePrimaryCtxGetState),
  };
  for (const absl::Status& status : s) {
    if (!status.ok()) return status;
  }
  return api;
}

}  // namespace

absl::Status ClassifyCudaStart(int count_error, int count, int driver_version,
                               int runtime_version) {
  if (count_error == cudaSuccess) {
    if (count > 0) return absl::OkStatus();
    return absl::UnavailableError("no CUDA card: the driver sees zero devices");
  }
  if (count_error == cudaErrorNoDevice) return absl::UnavailableError("no CUDA card");
  const std::string what = absl::StrFormat(
      "cudaGetDeviceCount: %s (%d)", cudaGetErrorString(static_cast<cudaError_t>(count_error)),
      count_error);
  if (count_error == cudaErrorInsufficientDriver && driver_version == 0) {
    return absl::UnavailableError(absl::StrCat("no CUDA driver: ", what));
  }
  if (count_error == cudaErrorInsufficientDriver || driver_version < runtime_version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the CUDA driver supports CUDA %s, older than the CUDA %s runtime this binary is built "
        "with; install a newer driver (%s)",
        CudaVersion(driver_version), CudaVersion(runtime_version), what));
  }
  return absl::InternalError(absl::StrCat("the cards cannot be used: ", what));
}

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
