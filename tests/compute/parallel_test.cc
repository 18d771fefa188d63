#include "compute/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace zero {
namespace {

// Every index visited once; chunks start on multiples of policy.multiple.
void ExpectExactCover(ThreadPool& pool, size_t n, ChunkPolicy policy) {
  std::vector<int> visits(n, 0);
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> chunks;
  pool.ParallelFor(
      n,
      [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) ++visits[i];
        std::lock_guard<std::mutex> lock(mu);
        chunks.emplace_back(begin, end);
      },
      policy);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(visits[i], 1) << "n " << n << " index " << i;
  EXPECT_LE(chunks.size(), pool.num_threads() * policy.chunks_per_thread + 1);
  for (const auto& [begin, end] : chunks) {
    EXPECT_EQ(begin % policy.multiple, 0u);
    EXPECT_LT(begin, end);
  }
}

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{16385}, size_t{100000},
                     size_t{(1 << 20) + 7}}) {
      ExpectExactCover(pool, n, {});
      ExpectExactCover(pool, n, {.min_chunk = 1, .multiple = 16});
      ExpectExactCover(pool, n, {.min_chunk = 100, .multiple = 1, .chunks_per_thread = 1});
    }
  }
}

TEST(ThreadPoolTest, SmallJobsRunOnTheCaller) {
  ThreadPool pool(4);
  std::thread::id ran_on;
  int calls = 0;
  pool.ParallelFor(1000, [&](size_t begin, size_t end) {
    ran_on = std::this_thread::get_id();
    ++calls;
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 1000u);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// A thread that is slow (here: sleeping) does not make the others wait for
// its share: the rest of the chunks go to whoever is free.
TEST(ThreadPoolTest, FreeThreadsTakeTheSlowOnesShare) {
  ThreadPool pool(2);
  std::mutex mu;
  std::map<std::thread::id, size_t> elements;
  pool.ParallelFor(64000,
                   [&](size_t begin, size_t end) {
                     if (begin == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
                     std::lock_guard<std::mutex> lock(mu);
                     elements[std::this_thread::get_id()] += end - begin;
                   },
                   {.min_chunk = 1000, .chunks_per_thread = 8});
  size_t most = 0;
  for (const auto& [id, count] : elements) most = std::max(most, count);
  EXPECT_GT(most, 64000u * 3 / 4);  // the thread that slept did one chunk
}

TEST(ThreadPoolTest, ConcurrentCallersTakeTurns) {
  ThreadPool pool(3);
  constexpr size_t kN = 100000;
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        std::atomic<size_t> sum{0};
        pool.ParallelFor(kN, [&](size_t begin, size_t end) { sum += end - begin; },
                         {.min_chunk = 1000});
        if (sum != kN) ++failures;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures, 0);
}

TEST(GlobalPoolTest, SetNumThreads) {
  SetNumThreads(3);
  EXPECT_EQ(NumThreads(), 3);
  std::atomic<size_t> sum{0};
  ParallelFor(1 << 20, [&](size_t begin, size_t end) { sum += end - begin; });
  EXPECT_EQ(sum, size_t{1} << 20);
  SetNumThreads(0);
  EXPECT_EQ(NumThreads(), AvailableCpus());
  EXPECT_GE(AvailableCpus(), 1);
}

}  // namespace
}  // namespace zero
