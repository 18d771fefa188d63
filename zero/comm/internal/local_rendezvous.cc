#include "zero/comm/internal/local_rendezvous.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "zero/comm/internal/comm_errors.h"

namespace zero {

LocalRendezvous::LocalRendezvous(int world_size, absl::Duration timeout)
    : world_size_(world_size),
      // Beyond a century is forever (and would overflow a chrono deadline).
      timeout_(timeout > absl::Hours(24 * 365 * 100) ? absl::InfiniteDuration() : timeout),
      slots_(world_size),
      present_(world_size, false),
      positions_(world_size),
      enqueued_(world_size, 0),
      left_after_(world_size),
      left_why_(world_size) {}

void LocalRendezvous::PoisonLocked(absl::Status status) {
  if (!poison_.ok()) return;  // the first error is the cause; keep it
  poison_ = std::move(status);
  cv_.notify_all();
}

void LocalRendezvous::Abort(const absl::Status& reason) {
  MutexLock lock(mu_);
  PoisonLocked(reason.ok() ? absl::CancelledError("communicator group aborted") : reason);
}

void LocalRendezvous::Leave(int rank, uint64_t last_seq, const absl::Status& reason) {
  MutexLock lock(mu_);
  const Position& at = positions_[rank];
  if (at.seq < last_seq || at.inside) {
    // Calls of its still to run (queued on a stream) would use buffers
    // their owner may free once it is gone: they, and the group, fail fast.
    PoisonLocked(reason);
    return;
  }
  left_after_[rank] = last_seq;
  left_why_[rank] = reason;
  // Peers already waiting at a call it will never make fail now; later
  // callers fail on arrival.
  if (arrived_ > 0) CheckLeaversLocked(exited_ + 1);
}

void LocalRendezvous::CheckLeaversLocked(uint64_t seq) {
  for (int r = 0; r < world_size_; ++r) {
    if (left_after_[r].has_value() && *left_after_[r] < seq) {
      const std::string when = *left_after_[r] == 0
                                   ? std::string("before any collective")
                                   : absl::StrFormat("after collective #%d", *left_after_[r]);
      PoisonLocked(absl::Status(left_why_[r].code(), absl::StrFormat("collective #%d: %s %s", seq,
                                                                     left_why_[r].message(), when)));
      return;
    }
  }
}

absl::Status LocalRendezvous::status() const {
  MutexLock lock(mu_);
  return poison_;
}

void LocalRendezvous::Enqueued(int rank, uint64_t seq) {
  MutexLock lock(mu_);
  enqueued_[rank] = std::max(enqueued_[rank], seq);
}

template <class Predicate>
bool LocalRendezvous::WaitLocked(MutexLock& lock, std::chrono::steady_clock::time_point deadline,
                                 Predicate done) {
  if (timeout_ == absl::InfiniteDuration()) {
    lock.Await(cv_, done);
    return true;
  }
  return lock.AwaitUntil(cv_, deadline, done);
}

absl::Status LocalRendezvous::MismatchLocked(uint64_t seq) const {
  std::vector<std::optional<CollectiveCall>> calls(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (present_[r]) calls[r] = slots_[r].call;
  }
  return MismatchError(seq, calls);
}

absl::Status LocalRendezvous::TimeoutLocked(uint64_t seq) const {
  std::vector<int> missing;
  std::vector<std::string> where(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    const Position& p = positions_[r];
    if (present_[r]) {
      where[r] = absl::StrFormat("waiting in #%d %s", seq, slots_[r].call.ToString());
      continue;
    }
    missing.push_back(r);
    where[r] = p.seq == 0 ? std::string("has called no collective")
                          : absl::StrFormat("last called #%d %s (%s)", p.seq, p.call->ToString(),
                                            p.inside ? "still inside" : "returned");
    if (enqueued_[r] > p.seq) {  // it did call; its stream is stuck before the call
      const std::string calls = enqueued_[r] == p.seq + 1
                                    ? absl::StrFormat("#%d", enqueued_[r])
                                    : absl::StrFormat("#%d-#%d", p.seq + 1, enqueued_[r]);
      absl::StrAppend(&where[r], ", ", calls, " enqueued but not reached by its stream");
    }
  }
  return absl::DeadlineExceededError(
      absl::StrFormat("collective #%d timed out after %s waiting for %s: %s", seq,
                      absl::FormatDuration(timeout_), RankList(missing), GroupRanks(where)));
}

absl::Status LocalRendezvous::CheckArrivalLocked(int rank, uint64_t seq,
                                                 const absl::Status& invalid) {
  if (!invalid.ok()) {  // the rank gets its own error, the group a pointer to it
    PoisonLocked(RankFailedError(seq, rank, invalid));
    return invalid;
  }
  CheckLeaversLocked(seq);
  if (!poison_.ok()) return poison_;
  if (seq != exited_ + 1) {  // ranks move in lockstep; anything else is a bug
    PoisonLocked(absl::InternalError(absl::StrFormat(
        "rank %d arrived at collective #%d while the group is at #%d", rank, seq, exited_ + 1)));
    return poison_;
  }
  return absl::OkStatus();
}

bool LocalRendezvous::CallsAgreeLocked() const {
  for (int r = 0; r < world_size_; ++r) {
    if (present_[r] && !(slots_[r].call == slots_[first_].call)) return false;
  }
  return true;
}

absl::StatusOr<absl::Span<const Arrival>> LocalRendezvous::Arrive(int rank, uint64_t seq,
                                                                  const Arrival& mine,
                                                                  const absl::Status& invalid) {
  MutexLock lock(mu_);
  const auto deadline =
      timeout_ == absl::InfiniteDuration()
          ? std::chrono::steady_clock::time_point::max()
          : std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout_);
  auto turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return exited_ + 1 >= seq || !poison_.ok();
  };
  if (!WaitLocked(lock, deadline, turn)) {
    PoisonLocked(TimeoutLocked(exited_ + 1));  // the call that holds everyone up
  }
  positions_[rank] = {.seq = seq, .call = mine.call, .inside = true};
  if (absl::Status status = CheckArrivalLocked(rank, seq, invalid); !status.ok()) {
    positions_[rank].inside = false;
    return status;
  }
  slots_[rank] = mine;
  present_[rank] = true;
  if (first_ < 0) first_ = rank;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return entered_ >= seq || !poison_.ok();
  };
  if (++arrived_ == world_size_) {
    // Compared once all are here, so the message names every rank's call.
    if (CallsAgreeLocked()) {
      entered_ = seq;
      cv_.notify_all();
    } else {
      PoisonLocked(MismatchLocked(seq));
    }
  } else if (!WaitLocked(lock, deadline, ready)) {
    // Calls that already differ are the likelier cause than the late rank.
    PoisonLocked(CallsAgreeLocked() ? TimeoutLocked(seq) : MismatchLocked(seq));
  }
  // Once every rank arrived the collective runs, even if the group was
  // poisoned meanwhile: the peers are already reading this rank's buffers.
  if (entered_ >= seq) return absl::Span<const Arrival>(slots_);
  positions_[rank].inside = false;
  return poison_;
}

void LocalRendezvous::Depart(int rank, uint64_t seq) {
  MutexLock lock(mu_);
  if (++departed_ == world_size_) {
    departed_ = 0;
    arrived_ = 0;
    first_ = -1;
    std::fill(present_.begin(), present_.end(), false);
    exited_ = seq;
    cv_.notify_all();
  } else {
    lock.Await(cv_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exited_ >= seq; });
  }
  positions_[rank].inside = false;
}

}  // namespace zero
