// One background thread that runs tasks in the order they were posted: the
// offload engine's CPU optimizer steps run here while the engine's thread
// goes on with backward. Post and Wait are called from one thread (the
// engine's); tasks must not call back into the worker.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "base/mutex.h"

namespace zero {

class SerialWorker {
 public:
  using Task = std::function<absl::Status()>;

  SerialWorker();
  // Runs what is queued, then joins.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // After a task fails, later ones are dropped until Wait reports it.
  void Post(Task task);
  // Blocks until the queue is empty; returns the first error since the
  // last Wait (and clears it).
  absl::Status Wait();

 private:
  void Run();

  Mutex mu_;
  std::condition_variable changed_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace zero
