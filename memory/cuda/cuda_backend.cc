#include "memory/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/cuda/cuda_stream.h"
#include "memory/cuda/driver_api.h"

namespace zero {
namespace {

using cuda::DriverStatus;
using cuda::RuntimeStatus;

CUmemAllocationProp PinnedOn(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// Each granule is its own physical allocation, so any granule can be
// unmapped alone when the pool trims (cuMemUnmap takes whole mappings).
class CudaBackend final : public Backend {
 public:
  CudaBackend(const cuda::DriverApi* api, std::vector<size_t> capacity, size_t granularity)
      : api_(api), capacity_(std::move(capacity)), granularity_(granularity) {
    for (int d = 0; d < device_count(); ++d) {
      CUmemAccessDesc desc{};
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = d;
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access_.push_back(desc);
    }
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int device_count() const override { return static_cast<int>(capacity_.size()); }
  size_t capacity(int device) const override { return capacity_[device]; }
  size_t granularity() const override { return granularity_; }
  bool has_bytes() const override { return true; }

  absl::StatusOr<uintptr_t> Reserve(size_t bytes) override {
    CUdeviceptr base = 0;
    RETURN_IF_ERROR(DriverStatus(api_->MemAddressReserve(&base, bytes, granularity_, 0, 0),
                                 "cuMemAddressReserve"));
    return static_cast<uintptr_t>(base);
  }

  absl::Status Unreserve(uintptr_t base, size_t bytes) override {
    return DriverStatus(api_->MemAddressFree(base, bytes), "cuMemAddressFree");
  }

  absl::Status Map(int device, uintptr_t addr, size_t bytes) override {
    const CUmemAllocationProp prop = PinnedOn(device);
    for (size_t done = 0; done < bytes; done += granularity_) {
      CUmemGenericAllocationHandle handle = 0;
      absl::Status s = DriverStatus(api_->MemCreate(&handle, granularity_, &prop, 0), "cuMemCreate");
      if (s.ok()) {
        s = DriverStatus(api_->MemMap(addr + done, granularity_, 0, handle, 0), "cuMemMap");
        // The mapping keeps the memory alive; the handle is not needed again.
        api_->MemRelease(handle);
      }
      if (s.ok()) {
        // Mapping grants no access: every card may read and write every slice.
        s = DriverStatus(api_->MemSetAccess(addr + done, granularity_, access_.data(),
                                            access_.size()),
                         "cuMemSetAccess");
      }
      if (!s.ok()) {
        if (done > 0) (void)Unmap(device, addr, done);
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Unmap(int, uintptr_t addr, size_t bytes) override {
    for (size_t done = 0; done < bytes; done += granularity_) {
      RETURN_IF_ERROR(DriverStatus(api_->MemUnmap(addr + done, granularity_), "cuMemUnmap"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    return cuda::CudaStream::Create(device);
  }

  absl::StatusOr<std::unique_ptr<Stream>> WrapNativeStream(int device, void* native) override {
    return cuda::CudaStream::Wrap(device, static_cast<cudaStream_t>(native));
  }

 private:
  const cuda::DriverApi* api_;
  std::vector<size_t> capacity_;
  size_t granularity_;
  std::vector<CUmemAccessDesc> access_;
};

absl::Status CheckCard(const cuda::DriverApi& api, int device, int count) {
  CUdevice dev = 0;
  RETURN_IF_ERROR(DriverStatus(api.DeviceGet(&dev, device), "cuDeviceGet"));
  int vmm = 0;
  RETURN_IF_ERROR(DriverStatus(
      api.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
      "cuDeviceGetAttribute"));
  if (!vmm) {
    return absl::FailedPreconditionError(
        absl::StrFormat("card %d does not support virtual memory management", device));
  }
  for (int peer = 0; peer < count; ++peer) {
    int can = 1;
    if (peer != device) RETURN_IF_ERROR(RuntimeStatus(
        cudaDeviceCanAccessPeer(&can, device, peer), "cudaDeviceCanAccessPeer"));
    if (!can) {
      return absl::FailedPreconditionError(
          absl::StrFormat("card %d cannot access card %d: no single address range", device, peer));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend() {
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::GetDriverApi());
  int count = 0;
  RETURN_IF_ERROR(RuntimeStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  std::vector<size_t> capacity;
  size_t granularity = 0;
  for (int d = 0; d < count; ++d) {
    RETURN_IF_ERROR(CheckCard(*api, d, count));
    RETURN_IF_ERROR(RuntimeStatus(cudaSetDevice(d), "cudaSetDevice"));
    size_t free_bytes = 0, total = 0;
    RETURN_IF_ERROR(RuntimeStatus(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo"));
    capacity.push_back(free_bytes);  // what this process can actually get
    const CUmemAllocationProp prop = PinnedOn(d);
    size_t g = 0;
    RETURN_IF_ERROR(DriverStatus(api->MemGetAllocationGranularity(
                                     &g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                                 "cuMemGetAllocationGranularity"));
    granularity = std::max(granularity, g);
  }
  for (size_t& c : capacity) c -= c % granularity;
  return std::unique_ptr<Backend>(new CudaBackend(api, std::move(capacity), granularity));
}

}  // namespace zero
