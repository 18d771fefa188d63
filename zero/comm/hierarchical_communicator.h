// A communicator over several nodes, composed of two others: one over the
// ranks of this rank's node (`intra`), one over the ranks of the other nodes
// with the same local rank (`inter`, one per local rank). Each byte that
// must leave a node crosses the slow level once, on every rank's own link,
// instead of a flat ring's boundary ranks carrying all of it:
//   all-gather:     inter all-gather, then an intra all-gather per node;
//   reduce-scatter: an intra reduce-scatter per node, then inter;
//   all-reduce:     the reduce-scatter then the all-gather over N equal
//                   chunks; the last count % N elements intra then inter;
//   broadcast:      inter among the root's local rank, then intra;
//   barrier:        intra, inter, intra;
//   all-to-all:     intra per node block, then inter (a flat one's bytes).
// With G ranks per node and M nodes a rank sends (M - 1) * count elements
// across for an all-gather or a reduce-scatter; a flat ring sends
// (N - 1) * count across on each node's last rank.
//
// The order of a sum (fp32 results are bit-exact across stages because every
// reduction uses it): each node sums its ranks in local rank order, then the
// node sums are added in node order:
//   (x[0] + ... + x[G-1]) + (x[G] + ... + x[2G-1]) + ...
// The reduce-scatter, the all-reduce and the tail use the same order, so
// stage 0's all-reduce gives the bits of stage 2's reduce-scatter. It is not
// the flat ring's order (x[0] + x[1] + ... + x[N-1]) once a node has more
// than one rank. Partial sums are rounded to the element type between the
// steps (the local backend sums in fp32 within a step): the engine reduces
// in fp32. ReduceOp::kAvg is refused (a per-step average divides by the
// wrong count): sum, then scale.
//
// Scratch of M * count elements per call comes from `scratch` (tagged
// communication) and is freed in stream order. Threading and stream
// contracts are communicator.h's; the sub-communicators are driven only by
// this one.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "memory/resource.h"
#include "zero/comm/communicator.h"
#include "zero/comm/topology.h"

namespace zero {

// What the adaptors of one group share so that a failure anywhere is seen
// everywhere: every rank's AsyncError() reports the first failed
// sub-communicator of any rank, and Abort() aborts all of them. Optional
// (each rank has its own when the ranks are processes).
class HierarchyLatch;
std::shared_ptr<HierarchyLatch> MakeHierarchyLatch(int world_size);

// InvalidArgument when intra's or inter's size or rank do not match
// `topology` and `rank` (intra: ranks_per_node, local rank; inter: nodes,
// node), or a pointer is null.
absl::StatusOr<std::unique_ptr<Communicator>> MakeHierarchicalCommunicator(
    const Topology& topology, int rank, std::unique_ptr<Communicator> intra,
    std::unique_ptr<Communicator> inter, MemoryResource* scratch,
    std::shared_ptr<HierarchyLatch> latch = nullptr);

}  // namespace zero
