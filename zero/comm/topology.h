// Which ranks share a node. Ranks are numbered node by node, as torchrun and
// every launcher number them: node n holds ranks [n * G, (n + 1) * G) for G
// ranks per node, and a rank's local rank is its place inside its node.
// A value type; one node (G = world size) unless told otherwise.
#pragma once

#include "absl/status/statusor.h"

namespace zero {

class Topology {
 public:
  // InvalidArgument when world_size < 1, ranks_per_node < 1, or
  // ranks_per_node does not divide world_size (nodes of unequal size).
  static absl::StatusOr<Topology> Create(int world_size, int ranks_per_node);
  static Topology OneNode(int world_size) { return Topology(world_size, world_size); }

  int world_size() const { return world_size_; }
  int ranks_per_node() const { return ranks_per_node_; }
  int nodes() const { return world_size_ / ranks_per_node_; }
  int node_of(int rank) const { return rank / ranks_per_node_; }
  int local_rank(int rank) const { return rank % ranks_per_node_; }
  int rank_of(int node, int local_rank) const { return node * ranks_per_node_ + local_rank; }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }
  bool multi_node() const { return ranks_per_node_ < world_size_; }

  bool operator==(const Topology&) const = default;

 private:
  Topology(int world_size, int ranks_per_node)
      : world_size_(world_size), ranks_per_node_(ranks_per_node) {}

  int world_size_;
  int ranks_per_node_;
};

}  // namespace zero
