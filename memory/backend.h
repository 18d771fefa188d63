// The thin seam between the shared memory logic and a kind of device.
//
// A backend owns the device-specific verbs only: reserve one virtual range,
// and the five steps of backing part of it with memory (create physical
// memory, map it, grant access, unmap, release), plus streams. How the steps
// are sequenced, chunked and rolled back is shared code (memory/uva_space.h),
// so the host backend runs exactly what a card runs. Thread-safe; steps on
// disjoint ranges may run in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

// Kept free on each device for what else runs there (NCCL, cuBLAS, CUDA's
// own memory pool, other processes' contexts): bytes plus a fraction of the
// capacity (free at start).
struct MemoryReserve {
  size_t bytes = 0;
  double fraction = 0;  // in [0, 1)
};

// Physical memory of one device before and while it is mapped
// (a CUmemGenericAllocationHandle on cards).
using PhysicalHandle = uint64_t;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  virtual int device_count() const = 0;
  // The number the device has outside this library, which callers such as
  // PyTorch pass: the CUDA card number on cards ("cuda:2" makes device 0
  // card 2), the index elsewhere.
  virtual int native_id(int device) const { return device; }
  // Physical bytes the device can hold (on cards: free at start).
  virtual size_t capacity(int device) const = 0;
  // Every size and offset below is a multiple of this.
  virtual size_t granularity() const = 0;
  // The mapping unit when the caller asks for none: large on cards, where
  // each unit costs driver calls, a granule elsewhere.
  virtual size_t default_chunk() const { return granularity(); }
  // Kept free per device when the caller names no reserve (UvaOptions).
  virtual MemoryReserve default_reserve() const { return {}; }
  // False on meta: addresses exist, bytes do not.
  virtual bool has_bytes() const = 0;

  // Reserves `bytes` of address space once (no physical memory).
  virtual absl::StatusOr<uintptr_t> Reserve(size_t bytes) = 0;
  virtual absl::Status Unreserve(uintptr_t base, size_t bytes) = 0;

  // The steps of backing a range, in this order; the caller undoes what it
  // did when a later step fails. Memory is unusable until SetAccess.
  virtual absl::StatusOr<PhysicalHandle> CreatePhysical(int device, size_t bytes) = 0;
  virtual absl::Status MapPhysical(uintptr_t addr, size_t bytes, PhysicalHandle handle) = 0;
  // Grants read and write on [addr, addr+bytes), one or more mapped
  // allocations, to `devices` (indices of this backend).
  virtual absl::Status SetAccess(uintptr_t addr, size_t bytes, std::span<const int> devices) = 0;
  // Unmaps exactly one earlier MapPhysical. The caller guarantees no pending
  // work still uses it; the memory goes back once it is also released.
  virtual absl::Status UnmapPhysical(uintptr_t addr, size_t bytes) = 0;
  // Drops the handle; a mapping keeps the memory alive until it is unmapped.
  virtual absl::Status ReleasePhysical(PhysicalHandle handle) = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) = 0;

  // Wraps a stream created outside this library (a cudaStream_t from PyTorch,
  // or null for CUDA's default stream) without owning it: the wrapper never
  // synchronizes or destroys it. Only cards have native streams.
  virtual absl::StatusOr<std::unique_ptr<Stream>> WrapNativeStream(int /*device*/,
                                                                   void* /*native*/) {
    return absl::UnimplementedError("this kind of device has no native streams");
  }
  // The device a native stream (not null) belongs to: a peer's stream may
  // use memory of another device, and its events must be made on its own.
  virtual absl::StatusOr<int> DeviceOfNativeStream(void* /*native*/) const {
    return absl::UnimplementedError("this kind of device has no native streams");
  }
};

}  // namespace zero
