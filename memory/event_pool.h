// Events recycled among one stream's Record() calls, so a record costs no
// allocation (and no cudaEventCreate on cards) once the stream is warm.
//
// The pool shares ownership of its events; one whose only owner is the pool
// (use_count() == 1) is no longer held by anyone and can be recorded again.
// A holder therefore never sees its event re-recorded: reuse waits until the
// last outside shared_ptr is gone. The count is exact here because only the
// pool makes copies, under its owner's lock; holders must not keep weak_ptrs.
// The pool keeps every event it makes: its size is the most events held at
// once, so a steady training step creates none (a cap would create and
// destroy the events past it on every step).
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
    absl::StatusOr<std::shared_ptr<E>> made = std::forward<Make>(make)();
    if (!made.ok()) return made;
    events_.push_back(*made);
    return made;
  }

  // Events made so far: the most held at once.
  size_t created() const { return events_.size(); }

 private:
  std::vector<std::shared_ptr<E>> events_;
  size_t next_ = 0;
};

}  // namespace zero
