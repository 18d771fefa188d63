// One thread that runs I/O requests one at a time, in the order they were
// submitted: the state file's reads and writes (state_file.h), the pager's
// reads ahead (pager.h). One request
// at a time is the disk's best: the virtio disk here moved the same reads
// and writes 10-35% slower with two or four requests in flight at once
// (their mix costs it seeks), and an order the caller chooses keeps the
// reads the step waits for ahead of the writes it does not.
//
// Thread-safe. Every request runs, whatever the earlier ones returned; its
// status comes back through its future.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace zero {

class IoThread {
 public:
  // ResourceExhausted when no thread can be started (a thread limit, no memory).
  static absl::StatusOr<std::unique_ptr<IoThread>> Create();
  // Runs what is queued, then joins.
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // An exception thrown by `request` (bad_alloc) comes back as an Internal
  // status, never through the future: a caller unwinding from it would
  // leave the requests behind it running on what it frees.
  template <typename Request>
  std::future<absl::Status> Submit(Request request) {
    std::packaged_task<absl::Status()> task([request = std::move(request)]() mutable {
      try {
        return request();
      } catch (const std::exception& e) {
        return absl::InternalError(std::string("I/O request threw: ") + e.what());
      }
    });
    std::future<absl::Status> done = task.get_future();
    Push(std::move(task));
    return done;
  }

 private:
  IoThread() = default;
  void Push(std::packaged_task<absl::Status()> task);
  void Run();

  Mutex mu_;
  std::condition_variable changed_;
  std::deque<std::packaged_task<absl::Status()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace zero
