// One forked process's share of a node range for tests: the range joined
// with test-sized slices and its devices over it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "memory/node_backend.h"
#include "memory/node_range.h"

namespace zero::testing {

inline constexpr size_t kNodeCapacity = size_t{256} << 20;
inline constexpr size_t kNodeChunk = size_t{2} << 20;

inline NodeRangeOptions NodeOptions(const std::string& key, int rank, int world) {
  NodeRangeOptions o;
  o.key = key;
  o.local_rank = rank;
  o.local_world = world;
  o.slice_bytes = NodeSliceBytes(kNodeCapacity, kNodeChunk);
  o.chunk = kNodeChunk;
  o.timeout = absl::Seconds(20);
  return o;
}

struct NodeProcess {
  std::shared_ptr<NodeRange> range;
  std::unique_ptr<DeviceSystem> devices;
};

inline absl::StatusOr<NodeProcess> JoinNode(const std::string& key, int rank, int world) {
  NodeProcess node;
  absl::StatusOr<std::shared_ptr<NodeRange>> range = NodeRange::Join(NodeOptions(key, rank, world));
  if (!range.ok()) return range.status();
  node.range = *std::move(range);
  absl::StatusOr<std::unique_ptr<DeviceSystem>> devices =
      CreateNodeDevices(node.range, kNodeCapacity);
  if (!devices.ok()) return devices.status();
  node.devices = *std::move(devices);
  return node;
}

}  // namespace zero::testing
