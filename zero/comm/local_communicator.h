// The local backend: a group of ranks that are threads of one process, over
// host memory (host devices, plain buffers) or meta devices (no bytes).
//
// Stream semantics: a call first waits for the work already on `stream`
// (Stream::Synchronize), then runs the collective on the calling thread and
// returns when this rank's part is done: its recv holds the result, and its
// send may be reused. Work enqueued on `stream` afterwards therefore sees the
// result. `stream` may be null (plain host memory, no stream).
//
// Each rank computes part of the result from its peers' buffers directly (one
// address space): all-gather and broadcast copy into the rank's own recv;
// reduce-scatter reduces the rank's chunk; all-reduce has rank r reduce the
// r-th of N balanced chunks and copy it into every rank's recv. Reductions
// add in rank order (rank 0 + rank 1 + ...) in fp32 and round once, so
// results are deterministic and equal a sequential sum. See
// local_rendezvous.h for mismatch, timeout and poisoning.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "zero/comm/communicator.h"

namespace zero {

struct LocalGroupOptions {
  // How long a rank waits at a collective for its peers before the group
  // fails with DeadlineExceeded.
  absl::Duration timeout = absl::Minutes(5);
  // False for meta devices: rendezvous, checks and counting, no bytes moved.
  bool has_bytes = true;
};

class LocalGroup {
 public:
  using Options = LocalGroupOptions;

  // world_size communicators, rank r at index r. Each is driven by its own
  // thread; they share the rendezvous, which lives until the last one is
  // destroyed. Destroying one fails the group (its peers could only time
  // out). InvalidArgument for world_size < 1 or a timeout <= 0.
  static absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> Create(int world_size,
                                                                           Options options = {});
};

}  // namespace zero
