// Readers of the owned state that run while training goes on (an async
// checkpoint's snapshot, copying on a stream of its own): until the last
// one is done, every change to the owned state waits for it first (Step
// before its update, offload's early updates, SetParam, restores, the
// state's own readers and writers, the engine's destructor). Used by the
// engine's thread only.
#pragma once

#include <chrono>
#include <future>

namespace zero {

class OwnedStateGuard {
 public:
  // From now until `read` is ready; an earlier reader is waited for first.
  void Guard(std::shared_future<void> read) {
    Await();
    reader_ = std::move(read);
  }
  // Before a change: waits for the reader, if any, and counts the wait.
  void Await() {
    if (!reader_.valid()) return;
    const auto start = std::chrono::steady_clock::now();
    reader_.wait();
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    reader_ = {};
  }
  double wait_seconds() const { return wait_seconds_; }

 private:
  std::shared_future<void> reader_;  // invalid: none
  double wait_seconds_ = 0;
};

}  // namespace zero
