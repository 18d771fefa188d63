// The local backend: a group of ranks that are threads of one process, over
// host memory (host devices, plain buffers), meta devices (no bytes), or the
// memory of cards (synchronous mode, with LocalGroupOptions::devices: the
// copies and sums run on the ranks' streams).
//
// When a call runs, by LocalGroupOptions::stream_ordered:
// - false (the default): the call first waits for the work already on
//   `stream` (Stream::Synchronize), then runs the collective on the calling
//   thread and returns when this rank's part is done: its recv holds the
//   result and its send may be reused.
// - true: NCCL's contract. The call checks its arguments and the group, puts
//   the collective on `stream` and returns; the stream's worker runs it after
//   the work enqueued before it, and work enqueued after it (or the host,
//   after stream->Synchronize()) sees the result. The buffers must stay valid
//   until then. A failure on the stream (mismatch, timeout, Abort, a peer's
//   invalid call) poisons the group: later calls fail at once, and
//   AsyncError() returns it. Host and meta streams only: a card's stream
//   would run it as a host callback, which must not block on peers
//   (InvalidArgument). Each rank's collectives may use several streams; a
//   rank's call #n then waits on its stream for the group to finish #n-1.
// In both modes a null `stream` runs the call on the calling thread. A
// communicator may be destroyed with work still queued: that fails the
// group, the queued work fails fast, and the shared rendezvous lives as long
// as any of it.
//
// Each rank computes part of the result from its peers' buffers directly (one
// address space): all-gather and broadcast copy into the rank's own recv;
// reduce-scatter reduces the rank's chunk; all-to-all copies its chunk of
// each peer's send; all-reduce has rank r reduce the
// r-th of N balanced chunks and copy it into every rank's recv. Reductions
// add in rank order (rank 0 + rank 1 + ...) in fp32 and round once, so
// results are deterministic and equal a sequential sum. See
// local_rendezvous.h for mismatch, timeout and poisoning messages.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "memory/device_system.h"
#include "zero/comm/communicator.h"
#include "zero/comm/simulated_link.h"

namespace zero {

struct LocalGroupOptions {
  // How long a rank waits at a collective for its peers before the group
  // fails with DeadlineExceeded.
  absl::Duration timeout = absl::Minutes(5);
  // False for meta devices: rendezvous, checks and counting, no bytes moved.
  bool has_bytes = true;
  // An option, off by default, because it changes what a returned OK means
  // (enqueued, not done): callers written for the synchronous contract would
  // reuse buffers too early and miss errors found later (AsyncError()).
  // Callers that synchronize their streams and check AsyncError() turn it on.
  bool stream_ordered = false;
  // Each rank's part of a call sleeps for the link's time (simulated_link.h)
  // on the thread running it (the stream's worker when stream-ordered), after
  // all ranks arrived and before the bytes move. Off by default.
  SimulatedLink link{};
  // Ranks per node (topology.h); 0: every rank on one node. With more than
  // one node the statistics count bytes per level, and a group that spans
  // nodes takes `across_link`'s time (a ring runs at its slowest link).
  int ranks_per_node = 0;
  // The link between nodes; unset: `link` with an eighth of its bandwidth.
  std::optional<SimulatedLink> across_link;
  // With more than one node, each rank's communicator is hierarchical
  // (hierarchical_communicator.h): a group per node and one per local rank
  // across the nodes, scratch from `devices`' pool of the rank's number.
  // False: one flat ring over every rank.
  bool hierarchical = true;
  // Where the ranks' buffers live. Needed when they are on cards: a call
  // (synchronous mode) given a card's stream moves its bytes as work on that
  // stream (Stream::Copy; sums by the element-wise executor, in rank order,
  // in fp32, rounded once: the same bits as on the host) and waits for it
  // before leaving; sums take fp32 scratch from the pool of the device that
  // holds the destination.
  DeviceSystem* devices = nullptr;
  // The same stream path for host streams (tests: what a card runs, on host
  // devices). Needs `devices`.
  bool move_on_streams = false;
};

class LocalGroup {
 public:
  using Options = LocalGroupOptions;

  // world_size communicators, rank r at index r (hierarchical ones, see
  // LocalGroupOptions::hierarchical, need `devices` with a device per rank). Each is driven by its own
  // thread; they share the rendezvous, which lives until the last one (or
  // the last work queued by one) is gone. Destroying one fails the group
  // (its peers could only time out). InvalidArgument for world_size < 1, a
  // timeout <= 0, a bad link (SimulatedLink::Validate), nodes of unequal
  // size, or hierarchical nodes without a device per rank.
  static absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> Create(int world_size,
                                                                           Options options = {});
};

}  // namespace zero
