// Timing of single passes, for benchmarks that rotate a piece of work and
// its ceilings inside one benchmark iteration so all see the same machine
// (on a shared host, bandwidth drifts between runs more than the difference
// being measured) and report ratios of the best passes, as STREAM does.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>

namespace zero::bench {

inline double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Wall and CPU seconds of one pass. CPU time (all threads; idle pool threads
// block, they do not spin) leaves out time the OS gave to other processes.
struct Pass {
  double wall, cpu;
};

template <class Body>
Pass Measure(Body body) {
  const double cpu = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  body();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          ProcessCpuSeconds() - cpu};
}

// Best and total seconds of a series of passes.
struct Times {
  double best = 1e300;
  double total = 0;
  double cpu_total = 0;
  void Add(const Pass& p) {
    best = std::min(best, p.wall);
    total += p.wall;
    cpu_total += p.cpu;
  }
};

}  // namespace zero::bench
