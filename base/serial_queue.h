// One thread that runs posted work one item at a time, in the order it was
// posted: a host stream's tasks (memory/host_stream.h), the state file's and
// the pager's I/O (offload/), the offload step's CPU work (zero/), a process
// group's collectives (zero/comm/callback_communicator.h). Each of those
// adds its own meaning (progress tickets, per-request statuses, skipping
// after an error) on top; the queue itself only keeps the order.
//
// Thread-safe: any thread may post. Work must not destroy the queue it runs
// on. The destructor runs everything already posted, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace zero {

class SerialQueue {
 public:
  using Work = absl::AnyInvocable<void() &&>;
  // Called on the queue's thread around every item (a host stream's delay
  // before, its progress after); either may be empty.
  struct Hooks {
    absl::AnyInvocable<void()> before;
    absl::AnyInvocable<void()> after;
  };

  // Starts the thread, named `name` (base/thread_name.h; a literal: the
  // pointer is kept); throws std::system_error when it cannot, as
  // std::thread does. Create is the same as a status.
  explicit SerialQueue(Hooks hooks = {}, const char* name = "zero-queue");
  // ResourceExhausted when no thread can be started (a thread limit, no memory).
  static absl::StatusOr<std::unique_ptr<SerialQueue>> Create(Hooks hooks = {},
                                                             const char* name = "zero-queue");
  ~SerialQueue();
  SerialQueue(const SerialQueue&) = delete;
  SerialQueue& operator=(const SerialQueue&) = delete;

  void Post(Work work);

  // Work that returns a status, which comes back through the future. An
  // exception it throws (bad_alloc) comes back as an Internal status, never
  // through the future: a caller unwinding from it would leave the work
  // behind it running on what it frees.
  template <typename Fn>
  std::future<absl::Status> Submit(Fn fn) {
    std::promise<absl::Status> done;
    std::future<absl::Status> result = done.get_future();
    Post([fn = std::move(fn), done = std::move(done)]() mutable {
      try {
        done.set_value(fn());
      } catch (const std::exception& e) {
        done.set_value(absl::InternalError(std::string("queued work threw: ") + e.what()));
      }
    });
    return result;
  }

  // Blocks until everything posted before the call has run. Not from the
  // queue's own thread.
  void Drain();

 private:
  void Run();

  Hooks hooks_;  // used by the queue's thread only
  const char* const name_;
  Mutex mu_;
  std::condition_variable changed_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace zero
