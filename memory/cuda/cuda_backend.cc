#include "memory/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "memory/cuda/cuda_stream.h"
#include "memory/cuda/current_device.h"
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

// Physical memory comes in chunks (memory/uva_space.h sequences the steps);
// each chunk is its own allocation and mapping, since cuMemUnmap takes whole
// mappings and trim gives chunks back one by one.
class CudaBackend final : public Backend {
 public:
  static constexpr size_t kDefaultChunk = size_t{64} << 20;
  static constexpr size_t kDefaultReserve = size_t{2} << 30;

  CudaBackend(const cuda::DriverApi* api, std::vector<int> ordinals, std::vector<size_t> capacity,
              size_t granularity)
      : api_(api),
        ordinals_(std::move(ordinals)),
        capacity_(std::move(capacity)),
        granularity_(granularity) {}

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  int device_count() const override { return static_cast<int>(capacity_.size()); }
  int native_id(int device) const override { return ordinals_[device]; }
  size_t capacity(int device) const override { return capacity_[device]; }
  size_t granularity() const override { return granularity_; }
  size_t default_chunk() const override { return std::max(kDefaultChunk, granularity_); }
  // The pool may grow to what is free at start less this: NCCL's buffers,
  // cuBLAS's workspaces and CUDA's default pool (the sum of squares' block
  // sums come from cudaMallocAsync) allocate outside it, later.
  MemoryReserve default_reserve() const override { return {.bytes = kDefaultReserve}; }
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

  absl::StatusOr<PhysicalHandle> CreatePhysical(int device, size_t bytes) override {
    const CUmemAllocationProp prop = PinnedOn(ordinals_[device]);
    CUmemGenericAllocationHandle handle = 0;
    RETURN_IF_ERROR(DriverStatus(api_->MemCreate(&handle, bytes, &prop, 0), "cuMemCreate"));
    return static_cast<PhysicalHandle>(handle);
  }

  absl::Status MapPhysical(uintptr_t addr, size_t bytes, PhysicalHandle handle) override {
    return DriverStatus(api_->MemMap(addr, bytes, 0, handle, 0), "cuMemMap");
  }

  absl::Status SetAccess(uintptr_t addr, size_t bytes, std::span<const int> devices) override {
    std::vector<CUmemAccessDesc> access;
    for (int d : devices) {
      CUmemAccessDesc desc{};
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = ordinals_[d];
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(desc);
    }
    return DriverStatus(api_->MemSetAccess(addr, bytes, access.data(), access.size()),
                        "cuMemSetAccess");
  }

  absl::Status UnmapPhysical(uintptr_t addr, size_t bytes) override {
    return DriverStatus(api_->MemUnmap(addr, bytes), "cuMemUnmap");
  }

  absl::Status ReleasePhysical(PhysicalHandle handle) override {
    return DriverStatus(api_->MemRelease(handle), "cuMemRelease");
  }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    if (device < 0 || device >= device_count()) {
      return absl::InvalidArgumentError(absl::StrFormat("no cuda device %d", device));
    }
    return cuda::CudaStream::Create(device, ordinals_[device]);
  }

  absl::StatusOr<std::unique_ptr<Stream>> WrapNativeStream(int device, void* native) override {
    if (device < 0 || device >= device_count()) {
      return absl::InvalidArgumentError(absl::StrFormat("no cuda device %d", device));
    }
    return cuda::CudaStream::Wrap(device, ordinals_[device], static_cast<cudaStream_t>(native));
  }

  absl::StatusOr<int> DeviceOfNativeStream(void* native) const override {
    const int ordinal = cuda::ScopedDevice::OrdinalOf(static_cast<cudaStream_t>(native));
    auto it = std::find(ordinals_.begin(), ordinals_.end(), ordinal);
    if (it == ordinals_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "stream %p belongs to card %d, which this system does not hold", native, ordinal));
    }
    return static_cast<int>(it - ordinals_.begin());
  }

 private:
  const cuda::DriverApi* api_;
  const std::vector<int> ordinals_;
  const std::vector<size_t> capacity_;
  const size_t granularity_;
};

// VMM support, and peer access to every other card in `ordinals`.
absl::Status CheckCard(const cuda::DriverApi& api, int ordinal, const std::vector<int>& ordinals) {
  CUdevice dev = 0;
  RETURN_IF_ERROR(DriverStatus(api.DeviceGet(&dev, ordinal), "cuDeviceGet"));
  int vmm = 0;
  RETURN_IF_ERROR(DriverStatus(
      api.DeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
      "cuDeviceGetAttribute"));
  if (!vmm) {
    return absl::FailedPreconditionError(
        absl::StrFormat("card %d does not support virtual memory management", ordinal));
  }
  for (int peer : ordinals) {
    int can = 1;
    if (peer != ordinal) RETURN_IF_ERROR(RuntimeStatus(
        cudaDeviceCanAccessPeer(&can, ordinal, peer), "cudaDeviceCanAccessPeer"));
    if (!can) {
      return absl::FailedPreconditionError(
          absl::StrFormat("card %d cannot access card %d: no single address range", ordinal, peer));
    }
  }
  return absl::OkStatus();
}

// The cards to use: `requested`, checked against what is visible, or all.
absl::StatusOr<std::vector<int>> SelectCards(const std::vector<int>& requested) {
  int count = 0;
  RETURN_IF_ERROR(RuntimeStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (requested.empty()) {
    std::vector<int> all(count);
    for (int d = 0; d < count; ++d) all[d] = d;
    return all;
  }
  for (int ordinal : requested) {
    if (ordinal < 0 || ordinal >= count) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cuda:%d: no such card (%d visible; CUDA_VISIBLE_DEVICES renumbers them)", ordinal,
          count));
    }
  }
  return requested;
}

// Free memory at start (what this process can actually get) and the VMM
// granularity of one card; initializes its context, and only its.
absl::Status MeasureCard(const cuda::DriverApi& api, int ordinal, size_t* free_bytes,
                         size_t* granularity) {
  cuda::ScopedDevice on(ordinal);
  RETURN_IF_ERROR(RuntimeStatus(on.status(), "cudaSetDevice"));
  size_t total = 0;
  RETURN_IF_ERROR(RuntimeStatus(cudaMemGetInfo(free_bytes, &total), "cudaMemGetInfo"));
  const CUmemAllocationProp prop = PinnedOn(ordinal);
  return DriverStatus(
      api.MemGetAllocationGranularity(granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      "cuMemGetAllocationGranularity");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const std::vector<int>& ordinals) {
  ASSIGN_OR_RETURN(const cuda::DriverApi* api, cuda::GetDriverApi());
  ASSIGN_OR_RETURN(std::vector<int> cards, SelectCards(ordinals));
  std::vector<size_t> capacity;
  size_t granularity = 0;
  for (int ordinal : cards) {
    RETURN_IF_ERROR(CheckCard(*api, ordinal, cards));
    size_t free_bytes = 0, g = 0;
    RETURN_IF_ERROR(MeasureCard(*api, ordinal, &free_bytes, &g));
    capacity.push_back(free_bytes);
    granularity = std::max(granularity, g);
  }
  for (size_t& c : capacity) c -= c % granularity;
  return std::unique_ptr<Backend>(
      new CudaBackend(api, std::move(cards), std::move(capacity), granularity));
}

}  // namespace zero
