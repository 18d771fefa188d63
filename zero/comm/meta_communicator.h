// The meta backend: rank r of a group of N that exists only as arithmetic.
// There are no peers, so nothing waits and nothing moves; every collective
// still validates its arguments exactly as the other backends do (so a bad
// call is the same InvalidArgument here), counts ring-model traffic through
// the shared stats (comm_stats.h) and returns at once.
//
// What it is for: the real engine of one rank of a 1024-rank job, on a meta
// device, in one thread. ZeRO makes every rank identical by construction
// (each unit is padded to N * 16 elements and split equally), so what this
// rank allocates and sends is what every rank does. Nothing checks that the
// (absent) peers agree: a program whose ranks would diverge is not caught.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "zero/comm/communicator.h"

namespace zero {

class MetaCommunicator final : public Communicator {
 public:
  // InvalidArgument for world_size < 1 or rank outside [0, world_size).
  static absl::StatusOr<std::unique_ptr<MetaCommunicator>> Create(int rank, int world_size);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // Later calls fail with `reason` (Cancelled if OK), as a failed group does;
  // so does a call with invalid arguments (its InvalidArgument).
  void Abort(const absl::Status& reason) override;
  // OK, or what Abort or the first invalid call left.
  absl::Status AsyncError() const override;

 protected:
  absl::Status Execute(const CollectiveCall& call, const void* send, void* recv, Stream* stream,
                       const absl::Status& invalid) override;

 private:
  MetaCommunicator(int rank, int world_size) : rank_(rank), world_size_(world_size) {}

  const int rank_;
  const int world_size_;
  mutable Mutex mu_;  // Abort and AsyncError may come from other threads
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);  // OK until Abort or an invalid call
  // Set once aborted_ is: calls of a healthy group (millions, in footprint
  // runs) skip the mutex.
  std::atomic<bool> failed_{false};
};

}  // namespace zero
