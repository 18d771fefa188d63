// The NCCL backend: one communicator per card, NCCL loaded at run time
// (nccl_api.h). Compiled in every build; creation returns Unavailable where
// there is no CUDA driver, no card or no libnccl.
//
// Stream semantics: a call enqueues the collective on `stream` (a CUDA
// stream, Stream::native_handle(); null means the legacy default stream) and
// returns; the result is ready for work enqueued after it on that stream.
// The stream must be on the rank's card (checked with cudaStreamGetDevice);
// each call makes that card current and gives the caller back its own.
//
// Never a hang: communicators are non-blocking (ncclConfig_t blocking = 0)
// and their initialization ends by `init_timeout`. A watchdog (a thread per
// communicator, nccl_watchdog.h) polls ncclCommGetAsyncError and an event
// recorded after each collective; when NCCL reports an error, or a
// collective has not finished `timeout` after it was enqueued, it calls
// ncclCommAbort (the stream then drains) and every later call and
// AsyncError() return that error: DeadlineExceeded naming the rank and the
// collective, or NCCL's error. Each rank's watchdog ends its own rank, so
// every rank of a failed group gets an error. A call NCCL answers with
// ncclInProgress is waited out (to `timeout`, abortable) before anything
// else reaches the communicator or its stream. Destruction finalizes a
// healthy communicator (ncclCommFinalize, waited for to `timeout`) before
// ncclCommDestroy; a failed one, or one whose finalize fails or times out,
// is aborted instead.
//
// Several cards in one process: one thread per rank, each driving its own
// communicator (as engines do). The single-thread pattern (one thread
// issuing every rank's call between NcclGroupStart/End) cannot drive engines,
// which run one rank's whole step on its thread. A grouped call is launched
// by the outermost NcclGroupEnd, so the watchdog's clock for it starts there.
//
// Reductions run in the element type inside NCCL (bf16/fp16 are not
// accumulated in fp32 as in the local backend), in the order of NCCL's
// algorithm: the same on every rank, so ranks agree bit for bit, but not
// equal to the local backend's sums or to an unsharded run.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "zero/comm/communicator.h"
#include "zero/comm/file_rendezvous.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_rank_device.h"
#include "zero/comm/nccl_sequence_check.h"

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
  // A collective not finished on its stream this long after its call
  // returned fails the rank (the watchdog aborts it).
  absl::Duration timeout = absl::Minutes(10);
  // Initialization (every rank of the job must arrive) ends by then.
  absl::Duration init_timeout = absl::Minutes(5);
  // How often the watchdog thread polls.
  absl::Duration poll_interval = absl::Milliseconds(100);
};

class NcclGroup {
 public:
  // One process drives every card in `devices` (CUDA ordinals, not the
  // DeviceSystem's indices: with a `cuda:2,3` spec its device 0 is card 2),
  // rank i on devices[i]. Drive each rank from its own thread.
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
// several communicators, are launched together; NcclGroupEnd returns once
// each of those communicators has enqueued them (nccl::GroupEnd below). Not
// for engines (see the top of this file). Unavailable without NCCL.
absl::Status NcclGroupStart();
absl::Status NcclGroupEnd();

}  // namespace zero

namespace zero::nccl {

// Wraps an initialized NCCL communicator (owned) as rank `rank` of
// `world_size` on `device`: what NcclGroup does for each rank, open to tests
// with a fake NcclApi and NcclRankDevice. `check` is needed iff
// options.check_every > 0.
std::unique_ptr<Communicator> WrapComm(const NcclApi* api, ncclComm_t comm, int rank,
                                       int world_size, std::unique_ptr<NcclRankDevice> device,
                                       NcclOptions options,
                                       std::unique_ptr<NcclSequenceCheck> check = nullptr);

// What NcclGroupStart/End do, over `api` (tests pass a fake). GroupEnd then
// waits, each to its options.timeout, until every communicator that enqueued
// a call on this thread since the outermost GroupStart is no longer
// ncclInProgress (a non-blocking communicator's grouped calls are enqueued
// only then), and hands its grouped calls to its watchdog; one that fails
// or times out is aborted, and the first error is returned. Those communicators must outlive the GroupEnd (one destroyed
// on this thread before then is left out).
absl::Status GroupStart(const NcclApi& api);
absl::Status GroupEnd(const NcclApi& api);

using MakeDeviceFn = absl::StatusOr<std::unique_ptr<NcclRankDevice>> (*)(int ordinal);

// Takes ownership of comms[i] (initialized: rank first_rank + i of
// `world_size` on devices[i]) and wraps each (WrapComm, with a sequence
// check when options.check_every > 0). When a rank's device or check cannot
// be made, every comm is aborted, wrapped or not (its peers would wait for
// the missing rank), and that error is returned.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> WrapComms(
    const NcclApi* api, std::vector<ncclComm_t> comms, int first_rank, int world_size,
    absl::Span<const int> devices, const NcclOptions& options,
    MakeDeviceFn make_device = MakeCudaRankDevice);

using OnCardFn = absl::Status (*)(int ordinal, absl::FunctionRef<absl::Status()> body);

// Initializes ranks first_rank + i on devices[i] of a world of `world_size`
// inside one group, non-blocking where the library can (2.14+), and waits
// for them until `timeout`: DeadlineExceeded naming the rank that did not
// finish (its peers never came), and every comm started is aborted.
// FailedPrecondition, before anything starts, when NCCL_COMM_BLOCKING asks
// for blocking communicators (their calls can hang past the watchdog).
absl::StatusOr<std::vector<ncclComm_t>> InitComms(const NcclApi& api, const ncclUniqueId& id,
                                                  int first_rank, int world_size,
                                                  absl::Span<const int> devices,
                                                  absl::Duration timeout,
                                                  OnCardFn on_card = RunOnCard);

}  // namespace zero::nccl
