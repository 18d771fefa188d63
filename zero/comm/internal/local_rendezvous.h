// The meeting point of a local group's ranks (threads of one process, or
// the workers of their streams), one collective at a time, in two phases:
//   Arrive: each rank posts its call and buffers, and waits until all ranks
//     posted the same call; then each reads its peers' buffers. A rank that
//     gets to call #n before the group finished #n-1 (its calls sit on
//     several streams) waits for its turn first, within the same deadline.
//   Depart: the exit barrier; nobody returns (and reuses its buffers) while a
//     peer may still read them.
// Failures poison the group: the first error is kept (status()) and every
// waiting and later Arrive returns it, so no rank hangs:
//   - calls that differ (FailedPrecondition, naming the call number and each
//     rank's call), found when the last rank arrives, or at the timeout;
//   - a rank with invalid arguments (it gets its InvalidArgument, the peers
//     FailedPrecondition naming it);
//   - a rank that does not arrive within the timeout (DeadlineExceeded for
//     the waiting ranks, naming the missing ranks, the call, and where each
//     rank is, including calls enqueued on a stream that has not reached them);
//   - Abort;
//   - a call that a rank which left (Leave) will never make.
// Depart has no deadline: once all ranks arrived, each only copies memory,
// so it finishes; waiting there is what keeps buffers alive. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "zero/comm/collective.h"

namespace zero {

// One rank's part of a collective, as its peers see it.
struct Arrival {
  CollectiveCall call;
  const void* send = nullptr;
  void* recv = nullptr;
};

class LocalRendezvous {
 public:
  LocalRendezvous(int world_size, absl::Duration timeout);

  // Waits for all ranks at collective number `seq` (1, 2, ... on every
  // rank). On success returns every rank's arrival, by rank, unchanged until
  // this rank's Depart(seq) returns. `invalid` is OK or this rank's
  // InvalidArgument, which it gets back at once (after poisoning the group).
  absl::StatusOr<absl::Span<const Arrival>> Arrive(int rank, uint64_t seq, const Arrival& mine,
                                                   const absl::Status& invalid);
  // Call after a successful Arrive(seq), once done with the peers' buffers.
  void Depart(int rank, uint64_t seq);

  void Abort(const absl::Status& reason);
  // Rank `rank` is gone after its call #last_seq: a peer's later call fails
  // with `reason`; the group stays healthy for the calls every rank made.
  // If some of its calls have not run yet (queued on a stream), the group
  // fails now instead.
  void Leave(int rank, uint64_t last_seq, const absl::Status& reason);
  // OK, or the error that poisoned the group.
  absl::Status status() const;
  // Rank `rank` has put its call #seq on a stream, to run later: timeout
  // messages then tell "stopped calling" from "its stream is behind".
  void Enqueued(int rank, uint64_t seq);

 private:
  // Where a rank is, for timeout messages.
  struct Position {
    uint64_t seq = 0;  // last collective it entered (0: none)
    std::optional<CollectiveCall> call;
    bool inside = false;  // still in that collective
  };

  // False when the deadline passed with `done` still false (never, with an
  // infinite timeout: then the deadline is ignored).
  template <class Predicate>
  bool WaitLocked(MutexLock& lock, std::chrono::steady_clock::time_point deadline,
                  Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckArrivalLocked(int rank, uint64_t seq, const absl::Status& invalid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CallsAgreeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MismatchLocked(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TimeoutLocked(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PoisonLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Poisons the group if a rank that left will never make call #seq.
  void CheckLeaversLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int world_size_;
  const absl::Duration timeout_;

  mutable Mutex mu_;  // base/mutex.h: seen by ThreadSanitizer, checked by clang
  std::condition_variable cv_;
  absl::Status poison_ ABSL_GUARDED_BY(mu_);
  // Every rank arrived at / departed from collectives up to this one.
  uint64_t entered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t exited_ ABSL_GUARDED_BY(mu_) = 0;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;   // at collective exited_ + 1
  int departed_ ABSL_GUARDED_BY(mu_) = 0;  // from collective exited_ + 1
  int first_ ABSL_GUARDED_BY(mu_) = -1;    // first rank to arrive at it
  std::vector<Arrival> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> present_ ABSL_GUARDED_BY(mu_);
  std::vector<Position> positions_ ABSL_GUARDED_BY(mu_);
  // By rank: the last call put on a stream (0: none).
  std::vector<uint64_t> enqueued_ ABSL_GUARDED_BY(mu_);
  // By rank: the last call of a rank that left, and why it left.
  std::vector<std::optional<uint64_t>> left_after_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> left_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zero
