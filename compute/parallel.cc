#include "compute/parallel.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "base/thread_name.h"

namespace zero {
namespace {

size_t ChunkSize(size_t n, size_t threads, const ChunkPolicy& policy) {
  const size_t multiple = std::max<size_t>(policy.multiple, 1);
  const size_t wanted = threads * std::max<size_t>(policy.chunks_per_thread, 1);
  const size_t by_grain = std::max<size_t>(n / std::max<size_t>(policy.min_chunk, 1), 1);
  const size_t parts = std::min(wanted, by_grain);
  const size_t chunk = (n + parts - 1) / parts;
  return (chunk + multiple - 1) / multiple * multiple;
}

struct GlobalPool {
  Mutex mu;
  std::shared_ptr<ThreadPool> pool ABSL_GUARDED_BY(mu);
};

GlobalPool& Global() {
  static GlobalPool* global = new GlobalPool;  // never destroyed: workers may outlive main
  return *global;
}

std::shared_ptr<ThreadPool> CurrentPool() {
  GlobalPool& g = Global();
  MutexLock lock(g.mu);
  if (g.pool == nullptr) g.pool = std::make_shared<ThreadPool>(DefaultThreads());
  return g.pool;
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  const size_t workers = static_cast<size_t>(std::max(num_threads, 1) - 1);
  workers_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) workers_.emplace_back([this, i] { WorkerLoop(i + 1); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Drain(const Job& job) {
  for (;;) {
    const size_t index = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (index >= job.chunks) return;
    const size_t begin = index * job.chunk;
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
  }
}

void ThreadPool::ParallelFor(size_t n, RangeFunction fn, ChunkPolicy policy) {
  if (n == 0) return;
  const size_t chunk = ChunkSize(n, static_cast<size_t>(num_threads()), policy);
  const size_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  MutexLock run_lock(run_mu_);
  const Job job{&fn, n, chunk, chunks, std::min(workers_.size(), chunks - 1)};
  {
    MutexLock lock(mu_);
    job_ = job;
    next_chunk_.store(0, std::memory_order_relaxed);  // the mutex publishes it
    busy_helpers_ = job.helpers;
    ++generation_;
  }
  wake_.notify_all();
  Drain(job);
  // Helpers still hold `job` (and fn) until they report back.
  MutexLock lock(mu_);
  lock.Await(done_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_helpers_ == 0; });
}

void ThreadPool::WorkerLoop(size_t index) {
  NameThisThread("zero-cpu");
  uint64_t seen = 0;
  for (;;) {
    Job job;
    {
      MutexLock lock(mu_);
      lock.Await(wake_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    if (index > job.helpers) continue;  // a small job: this worker sits it out
    Drain(job);
    MutexLock lock(mu_);
    if (--busy_helpers_ == 0) done_.notify_one();
  }
}

int AvailableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(std::max(std::thread::hardware_concurrency(), 1u));
}

int DefaultThreads() {
  if (const char* set = std::getenv("ZERO_NUM_THREADS"); set != nullptr) {
    if (const int n = std::atoi(set); n > 0) return n;
  }
  // Under torchrun the processes of a node share its CPUs: a pool per
  // process as wide as all of them runs LOCAL_WORLD_SIZE times too many
  // threads. Twice the even share: a process's sums and optimizer steps
  // often run while its peers wait in a collective, so up to 2x
  // oversubscription uses cores that would idle (measured on 2 cores:
  // 2 threads each at 2 processes, 1 at 4, gave the better step times).
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const int processes = local != nullptr ? std::max(std::atoi(local), 1) : 1;
  const int cpus = AvailableCpus();
  return std::clamp(2 * cpus / processes, 1, cpus);
}

void ParallelFor(size_t n, RangeFunction fn, ChunkPolicy policy) {
  CurrentPool()->ParallelFor(n, fn, policy);
}

void SetNumThreads(int n) {
  auto pool = std::make_shared<ThreadPool>(n <= 0 ? DefaultThreads() : n);
  GlobalPool& g = Global();
  MutexLock lock(g.mu);
  g.pool.swap(pool);
  // The old pool dies after the lock is released, or later with its last user.
}

int NumThreads() { return CurrentPool()->num_threads(); }

}  // namespace zero
