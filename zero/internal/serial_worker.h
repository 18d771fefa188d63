// The offload step's CPU work, run in order on one thread (base/serial_queue.h)
// while the engine's thread goes on with backward. What it adds to the
// queue: after a task fails, later ones are skipped until Wait reports the
// failure, since each early step assumes the ones before it ran. Post and
// Wait are called from one thread (the engine's); tasks must not call back
// into the worker.
#pragma once

#include <functional>
#include <future>
#include <vector>

#include "absl/status/status.h"
#include "base/serial_queue.h"

namespace zero {

class SerialWorker {
 public:
  using Task = std::function<absl::Status()>;

  // Runs what is queued, then joins.
  ~SerialWorker() = default;

  void Post(Task task);
  // Blocks until every posted task ran or was skipped; returns the first
  // error since the last Wait (and clears it).
  absl::Status Wait();

 private:
  std::vector<std::future<absl::Status>> posted_;  // since the last Wait
  bool failed_ = false;  // the queue's thread only: skip the rest
  SerialQueue queue_{{}, "zero-worker"};  // last: joined before the rest goes
};

}  // namespace zero
