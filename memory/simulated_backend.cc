#include "memory/simulated_backend.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/units.h"
#include "memory/host_stream.h"
#include "memory/internal/mapping_error.h"

namespace zero {

using internal::MappingError;

absl::StatusOr<uintptr_t> HostBackend::Reserve(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cannot reserve %s of address space: %s", FormatBytes(bytes), std::strerror(errno)));
  }
  return reinterpret_cast<uintptr_t>(p);
}

absl::Status HostBackend::Unreserve(uintptr_t base, size_t bytes) {
  if (munmap(reinterpret_cast<void*>(base), bytes) != 0) return MappingError("munmap", base, bytes);
  return absl::OkStatus();
}

absl::StatusOr<PhysicalHandle> SimulatedBackend::CreatePhysical(int device, size_t bytes) {
  if (device < 0 || device >= device_count_ || bytes == 0 || bytes % kGranularity != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot create %s on device %d of %d", FormatBytes(bytes), device, device_count_));
  }
  return next_handle_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status HostBackend::SetAccess(uintptr_t addr, size_t bytes, std::span<const int>) {
  if (mprotect(reinterpret_cast<void*>(addr), bytes, PROT_READ | PROT_WRITE) != 0) {
    return MappingError("mprotect", addr, bytes);
  }
  return absl::OkStatus();
}

absl::Status HostBackend::UnmapPhysical(uintptr_t addr, size_t bytes) {
  void* p = reinterpret_cast<void*>(addr);
  if (madvise(p, bytes, MADV_DONTNEED) != 0) return MappingError("madvise", addr, bytes);
  if (mprotect(p, bytes, PROT_NONE) != 0) return MappingError("mprotect", addr, bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Stream>> HostBackend::CreateStream(int device) {
  if (device < 0 || device >= device_count()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("no host device %d (there are %d)", device, device_count()));
  }
  const int index = stream_count_[device].fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<Stream>(std::make_unique<HostStream>(device, streams_, index));
}

absl::StatusOr<uintptr_t> MetaBackend::Reserve(size_t bytes) {
  if (bytes > ~kBase) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("meta address space cannot hold %s", FormatBytes(bytes)));
  }
  return kBase;
}

absl::StatusOr<std::unique_ptr<Stream>> MetaBackend::CreateStream(int device) {
  return std::unique_ptr<Stream>(std::make_unique<MetaStream>(device));
}

}  // namespace zero
