// Events recycled among one stream's Record() calls, so a record costs no
// allocation (and no cudaEventCreate on cards) once the stream is warm.
//
// The pool shares ownership of its events; one whose only owner is the pool
// (use_count() == 1) is no longer held by anyone and can be recorded again.
// A holder therefore never sees its event re-recorded: reuse waits until the
// last outside shared_ptr is gone. The count is exact here because only the
// pool makes copies, under its owner's lock; holders must not keep weak_ptrs.
// The pool keeps every event it makes and grows by doubling: its size is
// under twice the most events held at once, so a steady training step
// creates none (a cap would create and destroy the events past it on every
// step, and growing one at a time would create one whenever the count held
// at once, which host timing moves, reaches a new high).
// Not thread-safe: the owning stream's lock guards it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zero {

template <typename E>
class EventPool {
 public:
  // An event nobody else holds, for the caller to record again, or a new one
  // from `make` (a callable returning absl::StatusOr<std::shared_ptr<E>>),
  // kept for reuse.
  template <typename Make>
  absl::StatusOr<std::shared_ptr<E>> Acquire(Make&& make) {
    // Round robin: the event after the last one handed out is the oldest,
    // so the likeliest to have been dropped by its holders.
    for (size_t i = 0; i < events_.size(); ++i) {
      const size_t k = (next_ + i) % events_.size();
      if (events_[k].use_count() == 1) {
        next_ = k + 1;
        return events_[k];
      }
    }
    // None free: the pool doubles (at least one new event), so a held count
    // that wanders a little above its last peak makes no new events, and a
    // growing one makes O(log) batches in all.
    const size_t first = events_.size();
    const size_t grow = first < kFirstBatch ? kFirstBatch - first : first;
    for (size_t i = 0; i < grow; ++i) {
      absl::StatusOr<std::shared_ptr<E>> made = make();
      if (!made.ok()) {
        if (i == 0) return made;
        break;
      }
      events_.push_back(*std::move(made));
    }
    next_ = first + 1;
    return events_[first];
  }

  // Events made so far.
  size_t created() const { return events_.size(); }

 private:
  // A stream holds a few events at once in the usual case: made together
  // the first time, so small wanderings of that count create none later.
  static constexpr size_t kFirstBatch = 8;
  std::vector<std::shared_ptr<E>> events_;
  size_t next_ = 0;
};

}  // namespace zero
