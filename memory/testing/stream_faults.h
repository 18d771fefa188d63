// Test-only fault injection: drop one event dependency on host streams, so a
// test can show that a missing Stream::Wait makes it fail (run it with the
// delay mode of memory/host_stream.h, which makes the race show).
//
// Process-wide: while a DroppedStreamWait is alive, the `n`th call of
// Stream::Wait on a host stream (1-based, counted from its construction;
// only calls on `only` count when that is not null) returns OK and orders
// nothing. Every call counts, also on an event that is already complete, so
// the count does not depend on timing. One at a time: a second one replaces
// the first. Thread-safe; meant for tests, harmless (one atomic load per
// Wait) when none is alive.
#pragma once

#include "memory/host_stream.h"
#include "memory/stream.h"

namespace zero {

class DroppedStreamWait {
 public:
  explicit DroppedStreamWait(int n, const Stream* only = nullptr);
  ~DroppedStreamWait();  // disarms
  DroppedStreamWait(const DroppedStreamWait&) = delete;
  DroppedStreamWait& operator=(const DroppedStreamWait&) = delete;

  // Waits counted so far, and whether the `n`th was reached and dropped.
  int waits_seen() const;
  bool dropped() const;
};

}  // namespace zero
