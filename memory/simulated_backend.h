// Backends for machines without cards: host devices (real bytes in host
// memory, capacity enforced per device) and meta devices (addresses and
// accounting only, for footprint experiments at any scale).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memory/backend.h"
#include "memory/stream_delay.h"

namespace zero {

// Shared by host and meta: N devices of one capacity, 2 MiB granules.
// Physical memory is a counter: handles are numbered, nothing is allocated
// until the pages are touched.
class SimulatedBackend : public Backend {
 public:
  static constexpr size_t kGranularity = size_t{2} << 20;

  SimulatedBackend(int device_count, size_t capacity)
      : device_count_(device_count), capacity_(capacity) {}

  int device_count() const override { return device_count_; }
  size_t capacity(int) const override { return capacity_; }
  size_t granularity() const override { return kGranularity; }
  absl::StatusOr<PhysicalHandle> CreatePhysical(int device, size_t bytes) override;
  absl::Status MapPhysical(uintptr_t, size_t, PhysicalHandle) override {
    return absl::OkStatus();
  }
  absl::Status ReleasePhysical(PhysicalHandle) override { return absl::OkStatus(); }

 private:
  const int device_count_;
  const size_t capacity_;
  std::atomic<PhysicalHandle> next_handle_{1};
};

// The range is mmap(PROT_NONE, MAP_NORESERVE) and stays so when mapped, as a
// card's does until access is set; SetAccess makes it readable and writable,
// UnmapPhysical gives the pages back (MADV_DONTNEED) and protects them again,
// so a stale pointer faults instead of reading garbage. Its streams take
// `streams` (the delay mode), each with its index on its device.
class HostBackend final : public SimulatedBackend {
 public:
  HostBackend(int device_count, size_t capacity, HostStreamOptions streams = {})
      : SimulatedBackend(device_count, capacity),
        streams_(streams),
        stream_count_(device_count) {}
  DeviceKind kind() const override { return DeviceKind::kHost; }
  bool has_bytes() const override { return true; }
  absl::StatusOr<uintptr_t> Reserve(size_t bytes) override;
  absl::Status Unreserve(uintptr_t base, size_t bytes) override;
  absl::Status SetAccess(uintptr_t addr, size_t bytes, std::span<const int> devices) override;
  absl::Status UnmapPhysical(uintptr_t addr, size_t bytes) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override;

 private:
  const HostStreamOptions streams_;
  std::vector<std::atomic<int>> stream_count_;  // streams made so far, per device
};

// Addresses start at a fixed, never-dereferenced base far above user space.
class MetaBackend final : public SimulatedBackend {
 public:
  static constexpr uintptr_t kBase = uintptr_t{1} << 56;
  using SimulatedBackend::SimulatedBackend;
  DeviceKind kind() const override { return DeviceKind::kMeta; }
  bool has_bytes() const override { return false; }
  absl::StatusOr<uintptr_t> Reserve(size_t bytes) override;
  absl::Status Unreserve(uintptr_t, size_t) override { return absl::OkStatus(); }
  absl::Status SetAccess(uintptr_t, size_t, std::span<const int>) override {
    return absl::OkStatus();
  }
  absl::Status UnmapPhysical(uintptr_t, size_t) override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override;
};

}  // namespace zero
