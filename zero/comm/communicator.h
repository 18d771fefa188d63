// The collectives ZeRO needs, over a group of ranks (one device each), in
// NCCL's argument order: (send, recv, count, dtype, [op | root], stream).
//
// Contract, for every backend:
// - Every rank of the group must issue the same collectives in the same
//   order with the same count, dtype, op and root; only the buffers differ.
// - `stream` orders the collective with the rank's other work: it starts
//   after work enqueued on `stream` before the call, and work enqueued after
//   the call sees its result. When the call returns is the backend's (NCCL
//   and the local backend's stream-ordered mode return once enqueued; the
//   local backend's default mode and meta return when done). A call that
//   returned OK once enqueued may still fail on the stream: AsyncError().
// - In place is NCCL's: all-gather send == recv + rank*count,
//   reduce-scatter recv == send + rank*count, others send == recv.
// - count == 0 is a valid call that moves nothing.
// - Errors are values: InvalidArgument for this rank's bad arguments; other
//   codes when the group fails (mismatched calls, a missing rank, Abort).
//   After a group failure every later call on every rank fails fast, and
//   AsyncError() returns it.
// - bf16/fp16 reductions accumulate in fp32 and round once (local backend;
//   NCCL reduces in the element type).
// One communicator is driven by one thread at a time (like an NCCL comm);
// stats(), AsyncError() and Abort() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "base/mutex.h"
#include "memory/stream.h"
#include "zero/comm/collective.h"
#include "zero/comm/comm_stats.h"
#include "zero/comm/topology.h"

namespace zero {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Which ranks share a node; the levels of stats() follow it. One node
  // unless the backend was told otherwise.
  virtual Topology topology() const { return Topology::OneNode(world_size()); }

  // recv holds world_size * count elements; rank r's send lands at
  // recv + r * count.
  absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype, Stream* stream);
  // send holds world_size * count elements; recv gets the reduction of
  // every rank's chunk number rank() (count elements).
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             Stream* stream);
  absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                         Stream* stream);
  // Every rank's recv gets root's send; send is read on the root only.
  absl::Status Broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                         Stream* stream);
  // send holds world_size * count elements, chunk r for rank r; recv gets
  // rank r's chunk number rank() at recv + r * count. Not in place.
  absl::Status AllToAll(const void* send, void* recv, size_t count, DType dtype, Stream* stream);
  // Work enqueued on `stream` after the barrier starts after every rank's
  // work enqueued before it.
  absl::Status Barrier(Stream* stream);

  // The two groups of a communicator composed of a node's group and a group
  // across the nodes (hierarchical_communicator.h), for collectives that
  // work between the steps (quantized reductions); none for others. Calls
  // on them count in this one's levels, not in its kinds.
  struct Levels {
    Communicator* intra;
    Communicator* inter;
  };
  virtual std::optional<Levels> levels() { return std::nullopt; }

  // Fails the whole group with `reason` (Cancelled if OK): calls waiting on
  // any rank return it, later calls fail fast. For a rank that hits an error
  // outside the collectives, so its peers need not wait for a timeout.
  virtual void Abort(const absl::Status& reason) = 0;

  // OK while the group is healthy; else the first error that failed it, on
  // any rank: mismatched calls, a missing rank, a rank's invalid arguments,
  // Abort, and errors found while a collective ran on a stream after its call
  // had returned OK (NCCL's ncclCommGetAsyncError). Check it after
  // synchronizing the streams the collectives ran on (once per step).
  virtual absl::Status AsyncError() const = 0;

  // Ring-model traffic of this rank's calls that returned OK (for calls that
  // return once enqueued: counted when enqueued; see comm_stats.h). A
  // communicator composed of others adds what they moved.
  virtual CommStats stats() const;

 protected:
  // Runs one call. `invalid` is OK, or this rank's InvalidArgument from
  // ValidateCall: the backend returns it and should make the peers fail
  // rather than hang on the missing rank.
  virtual absl::Status Execute(const CollectiveCall& call, const void* send, void* recv,
                               Stream* stream, const absl::Status& invalid) = 0;
  // For backends that move bytes themselves: adds to stats().copied_bytes and
  // stats().reduced_bytes.
  void CountBackendBytes(uint64_t copied, uint64_t reduced);

 private:
  absl::Status Run(const CollectiveCall& call, const void* send, void* recv, Stream* stream);

  mutable Mutex stats_mu_;
  CommStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

}  // namespace zero
