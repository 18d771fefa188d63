#include "zero/comm/meta_communicator.h"

#include "absl/strings/str_format.h"

namespace zero {

absl::StatusOr<std::unique_ptr<MetaCommunicator>> MetaCommunicator::Create(int rank,
                                                                           int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("world size %d < 1", world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d is outside [0, %d)", rank, world_size));
  }
  return std::unique_ptr<MetaCommunicator>(new MetaCommunicator(rank, world_size));
}

void MetaCommunicator::Abort(const absl::Status& reason) {
  MutexLock lock(mu_);
  if (!aborted_.ok()) return;  // the first reason stays
  aborted_ = reason.ok() ? absl::CancelledError("the group was aborted") : reason;
  failed_ = true;
}

absl::Status MetaCommunicator::AsyncError() const {
  MutexLock lock(mu_);
  return aborted_;
}

// Validation happened in Communicator::Run; its verdict is ours. A bad call
// fails the group, as it would fail the peers of the other backends, so
// later calls fail fast with it. There is no stream work to wait for on a
// meta device and no peer to meet.
absl::Status MetaCommunicator::Execute(const CollectiveCall&, const void*, void*, Stream*,
                                       const absl::Status& invalid) {
  if (invalid.ok() && !failed_) return absl::OkStatus();
  MutexLock lock(mu_);
  if (!aborted_.ok()) return aborted_;
  aborted_ = invalid;
  failed_ = true;
  return invalid;
}

}  // namespace zero
