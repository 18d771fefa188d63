#include "zero/comm/topology.h"

#include "absl/strings/str_format.h"

namespace zero {

absl::StatusOr<Topology> Topology::Create(int world_size, int ranks_per_node) {
  if (world_size < 1 || ranks_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("topology: world size %d and ranks per node %d must both be >= 1",
                        world_size, ranks_per_node));
  }
  if (world_size % ranks_per_node != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "topology: %d ranks per node does not divide the world size %d (every node must "
        "hold the same number of ranks)",
        ranks_per_node, world_size));
  }
  return Topology(world_size, ranks_per_node);
}

}  // namespace zero
