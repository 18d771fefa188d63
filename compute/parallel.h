// A small fixed thread pool for the CPU optimizer loops: [0, n) is cut into
// contiguous chunks, a few per thread, and threads (the caller among them)
// take chunks until none are left, so a core slowed by another process does
// not hold up the rest. Calls from several threads at once are safe: they
// take turns (a memory-bound loop gains nothing from sharing the cores).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/mutex.h"

namespace zero {

using RangeFunction = absl::FunctionRef<void(size_t begin, size_t end)>;

struct ChunkPolicy {
  size_t min_chunk = 16384;      // elements; below this, waking a thread costs more than it saves
  size_t multiple = 32;          // chunk starts are multiples of this: 64 B for 2-byte grads
  size_t chunks_per_thread = 8;  // more chunks balance better; each costs one atomic add
};

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // clamped to >= 1; starts num_threads - 1 workers
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn on disjoint chunks covering [0, n), from any of the threads, and
  // returns when all are done. fn must not call ParallelFor on the same pool.
  void ParallelFor(size_t n, RangeFunction fn, ChunkPolicy policy = {});

 private:
  struct Job {
    const RangeFunction* fn = nullptr;
    size_t n = 0;
    size_t chunk = 0;
    size_t chunks = 0;
    size_t helpers = 0;  // workers 1..helpers take part
  };

  void WorkerLoop(size_t index);
  void Drain(const Job& job);  // runs chunks until none are left

  Mutex run_mu_;  // one job at a time
  Mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job job_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // The job ends when this reaches 0 and the caller is done.
  size_t busy_helpers_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<size_t> next_chunk_{0};  // reset only while no helper is busy
  std::vector<std::thread> workers_;
};

// The process-wide pool the optimizers and the ordered reductions use. It
// starts with DefaultThreads() threads.
void ParallelFor(size_t n, RangeFunction fn, ChunkPolicy policy = {});
// n <= 0 means DefaultThreads(). Calls in flight finish on the old pool.
void SetNumThreads(int n);
// $ZERO_NUM_THREADS when set, else this process's share of the CPUs it may
// run on: 2 x AvailableCpus() / $LOCAL_WORLD_SIZE (torchrun's processes per
// node; 1 when unset), between 1 and AvailableCpus().
int DefaultThreads();
int NumThreads();
int AvailableCpus();

}  // namespace zero
