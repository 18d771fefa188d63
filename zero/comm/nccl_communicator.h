// The NCCL backend: one communicator per card, NCCL loaded at run time
// (nccl_api.h). Compiled in every build; creation returns Unavailable where
// there is no CUDA driver, no card or no libnccl.
//
// Stream semantics: a call enqueues the collective on `stream` (a CUDA
// stream, Stream::native_handle(); null means the legacy default stream) and
// returns; the result is ready for work enqueued after it on that stream.
// Errors returned are those NCCL reports at enqueue time; AsyncError() asks
// NCCL for errors found later (ncclCommGetAsyncError, where the library has
// it) and keeps the first, so later calls fail fast. Buffers are device
// memory (or any memory NCCL accepts) of the communicator's card.
//
// Reductions run in the element type inside NCCL (bf16/fp16 are not
// accumulated in fp32 as in the local backend), and their order is NCCL's.
// Without the sequence check, NCCL cannot tell mismatched calls or invalid
// arguments on one rank to its peers: they hang as in any NCCL program.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "zero/comm/communicator.h"
#include "zero/comm/file_rendezvous.h"

namespace zero {

struct NcclOptions {
  // Every `check_every` calls (0: never) the ranks compare their recent
  // calls (nccl_sequence_check.h) and fail with FailedPrecondition naming the
  // first differing call, or DeadlineExceeded after `check_timeout` when a
  // rank never gets there (it stopped, or its NCCL call hangs). With 1,
  // every call is compared before it reaches NCCL, so a mismatch or one
  // rank's invalid arguments fail every rank at once; with K > 1 peers fail
  // at their next check. Each check synchronizes the stream, so it needs one
  // thread per rank (not one thread driving several ranks inside
  // NcclGroupStart/End).
  int check_every = 0;
  absl::Duration check_timeout = absl::Minutes(5);
};

class NcclGroup {
 public:
  // One process drives every card in `devices` (CUDA ordinals), rank i on
  // devices[i] (ncclCommInitAll). Drive the ranks from one thread each, or
  // from one thread between NcclGroupStart() and NcclGroupEnd().
  static absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateAll(
      absl::Span<const int> devices, NcclOptions options = {});

  // One process per node: this one holds ranks first_rank ... first_rank +
  // devices.size() - 1 of world_size, on `devices`. The process holding rank 0
  // creates NCCL's unique id and publishes it through `rendezvous`
  // (file_rendezvous.h); the others wait for it. Every process must call this
  // with the same world_size and path.
  static absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> CreateMultiNode(
      int first_rank, int world_size, const FileRendezvous& rendezvous,
      absl::Span<const int> devices, NcclOptions options = {});
};

// ncclGroupStart/End: collectives issued by this thread in between, on
// several communicators, are launched together (needed when one thread
// drives several ranks). Unavailable without NCCL.
absl::Status NcclGroupStart();
absl::Status NcclGroupEnd();

}  // namespace zero
