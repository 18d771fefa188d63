// The collectives of a node's processes over their shared range
// (memory/node_range.h): each process reads its peers' buffers in place
// and writes only its own, so no byte goes through a socket.
//
// Who does what (the local backend's split, one process per rank):
// all-gather copies every peer's send into its own recv; reduce-scatter sums
// its chunk of every peer's send; all-reduce sums its 1/N of the buffer,
// then copies the peers' sums; broadcast copies the root's send; all-to-all
// copies its chunk of each peer's send. Sums run in rank order in fp32 and
// round once (zero/comm/internal/host_reduce.h): the bits of the local
// backend and of the process-group path's ordered reductions.
//
// Ordering: flags in each process's mailbox (arrived, reduced, departed call
// numbers), written by their owner only. A call runs as work on its host
// stream (stream-ordered, NCCL's contract) or on the calling thread without
// one; cards' streams are refused. A peer that exits is noticed while
// waiting (a pidfd each), a peer's failure is read from its mailbox, and a
// peer that stops calling is a DeadlineExceeded naming it: never a hang.
//
// Buffers the peers must read (send; all-reduce's recv) that lie outside
// this process's slice are first copied into staging memory from `pool`
// (which must be this process's pool over the range). A recv in a peer's
// slice is InvalidArgument: a process writes only its own memory.
//
// One thread drives it (the engine's); stats() and AsyncError() from any.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "memory/node_range.h"
#include "memory/resource.h"
#include "zero/comm/communicator.h"

namespace zero {

struct NodeGroupOptions {
  // How long a process waits for its peers at one collective.
  absl::Duration timeout = absl::Minutes(5);
};

// Rank range->local_rank() of range->local_world(). `pool` allocates this
// process's staging memory (inside its slice) and outlives the
// communicator and the work it queued.
absl::StatusOr<std::unique_ptr<Communicator>> MakeNodeCommunicator(
    std::shared_ptr<NodeRange> range, MemoryResource* pool, NodeGroupOptions options = {});

}  // namespace zero
