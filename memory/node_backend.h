// The backend of one process's device inside a node range
// (node_range.h): the UVA space's only device is this process's slice, its
// physical memory the process's memfd, so every chunk the pool maps is
// announced to the peers and readable in their views. Streams are host
// streams. Thread-safe as the range is.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "memory/device_system.h"
#include "memory/node_range.h"
#include "memory/simulated_backend.h"

namespace zero {

class NodeBackend final : public SimulatedBackend {
 public:
  NodeBackend(std::shared_ptr<NodeRange> range, size_t capacity, HostStreamOptions streams = {});

  const std::shared_ptr<NodeRange>& range() const { return range_; }
  DeviceKind kind() const override { return DeviceKind::kHost; }
  bool has_bytes() const override { return true; }
  size_t granularity() const override { return range_->chunk(); }
  // The slice itself, once: ResourceExhausted when `bytes` exceeds it.
  absl::StatusOr<uintptr_t> Reserve(size_t bytes) override;
  absl::Status Unreserve(uintptr_t, size_t) override { return absl::OkStatus(); }
  absl::StatusOr<PhysicalHandle> CreatePhysical(int device, size_t bytes) override;
  absl::Status MapPhysical(uintptr_t addr, size_t bytes, PhysicalHandle) override {
    return range_->MapOwn(addr, bytes);
  }
  absl::Status SetAccess(uintptr_t addr, size_t bytes, std::span<const int>) override {
    return range_->OpenOwn(addr, bytes);
  }
  absl::Status UnmapPhysical(uintptr_t addr, size_t bytes) override {
    return range_->UnmapOwn(addr, bytes);
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream(int device) override {
    return streams_.CreateStream(device);
  }

 private:
  const std::shared_ptr<NodeRange> range_;
  HostBackend streams_;  // only for its streams
  bool reserved_ = false;
};

// The slice a process needs for a device of `capacity` (what its UVA space
// reserves, chunk-aligned): pass it as NodeRangeOptions::slice_bytes.
size_t NodeSliceBytes(size_t capacity, size_t chunk);

// This process's devices over `range`: one host device of `capacity`.
absl::StatusOr<std::unique_ptr<DeviceSystem>> CreateNodeDevices(std::shared_ptr<NodeRange> range,
                                                                 size_t capacity,
                                                                 PoolOptions options = {});

}  // namespace zero
