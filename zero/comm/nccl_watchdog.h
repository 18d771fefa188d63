// The NCCL backend's watchdog logic: the collectives a rank enqueued, each
// with a marker after it on its stream and a deadline, and NCCL's
// asynchronous error. Poll() says whether the rank is healthy; the
// communicator polls it on every call, in AsyncError() and from its watchdog
// thread, and aborts the NCCL communicator on the first failure, so a
// collective that never finishes ends in an error instead of a hang.
// Not thread-safe: the owning communicator calls it under its lock, with the
// rank's card current (markers are CUDA events of that card).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "zero/comm/nccl_api.h"
#include "zero/comm/nccl_rank_device.h"

namespace zero::nccl {

class NcclWatchdog {
 public:
  // `timeout`: how long a collective may take from its enqueueing to its
  // end on the stream. `comm` must outlive the watchdog or Poll's last call.
  NcclWatchdog(const NcclApi* api, ncclComm_t comm, int rank, absl::Duration timeout);

  // Collective number `seq`, described by `what` (CollectiveCall::ToString),
  // ends at `marker`, enqueued at `now`.
  void Track(uint64_t seq, std::string what, std::unique_ptr<ProgressMarker> marker,
             absl::Time now);

  // OK while healthy. Else the error NCCL reports (ncclCommGetAsyncError),
  // or DeadlineExceeded naming the rank and the oldest unfinished
  // collective once its deadline passed; the caller then aborts.
  absl::Status Poll(absl::Time now);

  // Collectives enqueued and not yet seen finished.
  size_t pending() const { return pending_.size(); }

  // Forgets them, destroying their markers (call with the card current).
  void Clear() { pending_.clear(); }

 private:
  struct Pending {
    uint64_t seq;
    std::string what;
    std::unique_ptr<ProgressMarker> marker;
    absl::Time deadline;
  };
  absl::Status AsyncError() const;

  const NcclApi* const api_;
  const ncclComm_t comm_;
  const int rank_;
  const absl::Duration timeout_;
  std::deque<Pending> pending_;  // in stream order: the first unfinished one is the oldest
};

}  // namespace zero::nccl
