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
//   - Abort.
// Depart has no deadline: once all ranks arrived, each only copies memory,
// so it finishes; waiting there is what keeps buffers alive. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
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
  bool WaitLocked(std::unique_lock<std::mutex>& lock,
                  std::chrono::steady_clock::time_point deadline, Predicate done);
  absl::Status CheckArrivalLocked(int rank, uint64_t seq, const absl::Status& invalid);
  bool CallsAgreeLocked() const;
  absl::Status MismatchLocked(uint64_t seq) const;
  absl::Status TimeoutLocked(uint64_t seq) const;
  void PoisonLocked(absl::Status status);

  const int world_size_;
  const absl::Duration timeout_;

  // std::mutex, not absl::Mutex: Debian's prebuilt abseil is not built for
  // ThreadSanitizer, which then cannot see absl::Mutex's ordering.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // All guarded by mu_.
  absl::Status poison_;
  uint64_t entered_ = 0;  // every rank arrived at collectives up to this one
  uint64_t exited_ = 0;   // every rank departed collectives up to this one
  int arrived_ = 0;       // at collective exited_ + 1
  int departed_ = 0;      // from collective exited_ + 1
  int first_ = -1;        // first rank to arrive at it
  std::vector<Arrival> slots_;
  std::vector<bool> present_;
  std::vector<Position> positions_;
  std::vector<uint64_t> enqueued_;  // by rank: last call put on a stream (0: none)
};

}  // namespace zero
