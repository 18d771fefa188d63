#include "zero/comm/nccl_watchdog.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace zero::nccl {

NcclWatchdog::NcclWatchdog(const NcclApi* api, ncclComm_t comm, int rank, absl::Duration timeout)
    : api_(api), comm_(comm), rank_(rank), timeout_(timeout) {}

void NcclWatchdog::Track(uint64_t seq, std::string what, std::unique_ptr<ProgressMarker> marker,
                         absl::Time now) {
  pending_.push_back({seq, std::move(what), std::move(marker), now + timeout_});
}

// ncclInProgress is not an error: a non-blocking communicator still working.
absl::Status NcclWatchdog::AsyncError() const {
  if (api_->CommGetAsyncError == nullptr) return absl::OkStatus();
  ncclResult_t async = ncclSuccess;
  RETURN_IF_ERROR(
      NcclStatus(*api_, api_->CommGetAsyncError(comm_, &async), "ncclCommGetAsyncError"));
  if (async == ncclSuccess || async == ncclInProgress) return absl::OkStatus();
  const absl::Status error = NcclStatus(*api_, async, "NCCL asynchronous error");
  return absl::Status(error.code(), absl::StrFormat("rank %d: %s", rank_, error.message()));
}

absl::Status NcclWatchdog::Poll(absl::Time now) {
  RETURN_IF_ERROR(AsyncError());
  while (!pending_.empty()) {
    Pending& oldest = pending_.front();
    ASSIGN_OR_RETURN(const bool done, oldest.marker->Done());
    if (!done) {
      if (now < oldest.deadline) return absl::OkStatus();
      return absl::DeadlineExceededError(
          absl::StrFormat("rank %d: collective #%d %s did not finish within %s (a peer is "
                          "missing, stopped or "
                          "called something else); the NCCL communicator is aborted",
                          rank_, oldest.seq, oldest.what, absl::FormatDuration(timeout_)));
    }
    pending_.pop_front();
  }
  return absl::OkStatus();
}

}  // namespace zero::nccl
