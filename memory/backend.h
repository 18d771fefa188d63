// The thin seam between the shared memory logic and a kind of device.
//
// A backend owns the device-specific verbs only: reserve one virtual range,
// map and unmap physical granules inside it (granting access to every
// device), and make streams. Everything above (slices, the pool, stats) is
// shared code. Thread-safe; Map/Unmap on disjoint ranges may run in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/stream.h"

namespace zero {

enum class DeviceKind { kCuda, kHost, kMeta };

constexpr std::string_view DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kHost: return "host";
    case DeviceKind::kMeta: return "meta";
  }
  return "?";
}

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  virtual int device_count() const = 0;
  // Physical bytes the device can hold.
  virtual size_t capacity(int device) const = 0;
  // Map/Unmap sizes and offsets are multiples of this.
  virtual size_t granularity() const = 0;
  // False on meta: addresses exist, bytes do not.
  virtual bool has_bytes() const = 0;

  // Reserves `bytes` of address space once (no physical memory).
  virtual absl::StatusOr<uintptr_t> Reserve(size_t bytes) = 0;
  virtual absl::Status Unreserve(uintptr_t base, size_t bytes) = 0;
  // Backs [addr, addr+bytes) with memory of `device`, readable and writable
  // from every device.
  virtual absl::Status Map(int device, uintptr_t addr, size_t bytes) = 0;
  // Returns the memory; the range stays reserved. The caller guarantees no
  // pending work still uses it.
  virtual absl::Status Unmap(int device, uintptr_t addr, size_t bytes) = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) = 0;

  // Wraps a stream created outside this library (a cudaStream_t from PyTorch,
  // or null for CUDA's default stream) without owning it: the wrapper never
  // synchronizes or destroys it. Only cards have native streams.
  virtual absl::StatusOr<std::unique_ptr<Stream>> WrapNativeStream(int /*device*/,
                                                                   void* /*native*/) {
    return absl::UnimplementedError("this kind of device has no native streams");
  }
};

}  // namespace zero
