#include "memory/node_backend.h"

#include "absl/strings/str_format.h"
#include "base/units.h"

namespace zero {

NodeBackend::NodeBackend(std::shared_ptr<NodeRange> range, size_t capacity,
                         HostStreamOptions streams)
    : SimulatedBackend(1, capacity), range_(std::move(range)), streams_(1, capacity, streams) {}

absl::StatusOr<uintptr_t> NodeBackend::Reserve(size_t bytes) {
  if (reserved_ || bytes > range_->slice_bytes()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "node range '%s': a space of %s does not fit local rank %d's %s slice%s", range_->key(),
        FormatBytes(bytes), range_->local_rank(), FormatBytes(range_->slice_bytes()),
        reserved_ ? " (already reserved)" : ""));
  }
  reserved_ = true;
  return range_->slice_begin(range_->local_rank());
}

absl::StatusOr<PhysicalHandle> NodeBackend::CreatePhysical(int device, size_t bytes) {
  if (device != 0 || bytes == 0 || bytes % range_->chunk() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot create %s on device %d of a node range's process (one device, %s chunks)",
        FormatBytes(bytes), device, FormatBytes(range_->chunk())));
  }
  return SimulatedBackend::CreatePhysical(0, bytes);
}

size_t NodeSliceBytes(size_t capacity, size_t chunk) {
  // UvaSpace: twice the capacity, plus a chunk to align the start.
  return AlignUp(capacity * 2, chunk) + chunk;
}

absl::StatusOr<std::unique_ptr<DeviceSystem>> CreateNodeDevices(std::shared_ptr<NodeRange> range,
                                                                 size_t capacity,
                                                                 PoolOptions options) {
  if (range == nullptr) return absl::InvalidArgumentError("no node range");
  UvaOptions space;
  space.chunk = range->chunk();
  space.slice_factor = 2;
  return DeviceSystem::CreateOver(std::make_unique<NodeBackend>(std::move(range), capacity),
                                  space, options);
}

}  // namespace zero
