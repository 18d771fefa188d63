// One thread that runs posted functions one at a time, in the order they
// were posted: how a CallbackCommunicator keeps every rank's collectives in
// the one order a process group needs while the caller goes on.
// Post is thread-safe; the destructor runs what was posted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <thread>

#include "absl/functional/any_invocable.h"
#include "base/mutex.h"

namespace zero {

class CallThread {
 public:
  CallThread();
  ~CallThread();
  CallThread(const CallThread&) = delete;
  CallThread& operator=(const CallThread&) = delete;

  void Post(absl::AnyInvocable<void() &&> fn);

 private:
  void Run();

  Mutex mu_;
  std::condition_variable posted_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace zero
