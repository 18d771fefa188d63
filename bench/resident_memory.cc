#include "bench/resident_memory.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

namespace zero {

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t PeakResidentGrowth(const std::function<void()>& fn) {
  const uint64_t start = ResidentBytes();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{start};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max<uint64_t>(peak, ResidentBytes());
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  fn();
  done = true;
  sampler.join();
  return std::max<uint64_t>(peak, ResidentBytes()) - start;
}

}  // namespace zero
