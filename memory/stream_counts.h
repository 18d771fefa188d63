// What a device's streams cost the host, counted where every backend's work
// passes (memory/stream.h's non-virtual verbs), so host devices count the
// same way cards do:
//  - enqueued: operations put on a stream (host tasks, copies, fills, kernel
//    launches of the element-wise executor and the optimizers);
//  - host_waits: a Synchronize of a stream or of an event (the host blocks);
//  - driver_calls: calls that enqueue nothing yet cost a driver round trip
//    on a card (events and staging buffers created, pointer queries).
// The DeviceSystem keeps one StreamCounts per device and every stream of the
// device counts into it. Thread-safe; relaxed atomics: totals, not an order.
#pragma once

#include <atomic>
#include <cstdint>

namespace zero {

struct StreamOps {
  uint64_t enqueued = 0;
  uint64_t host_waits = 0;
  uint64_t driver_calls = 0;

  friend StreamOps operator+(const StreamOps& a, const StreamOps& b) {
    return {a.enqueued + b.enqueued, a.host_waits + b.host_waits,
            a.driver_calls + b.driver_calls};
  }
  friend StreamOps operator-(const StreamOps& a, const StreamOps& b) {
    return {a.enqueued - b.enqueued, a.host_waits - b.host_waits,
            a.driver_calls - b.driver_calls};
  }
  friend bool operator==(const StreamOps&, const StreamOps&) = default;
};

// Each field the larger of the two: the busiest window over several.
inline StreamOps Max(const StreamOps& a, const StreamOps& b) {
  return {a.enqueued > b.enqueued ? a.enqueued : b.enqueued,
          a.host_waits > b.host_waits ? a.host_waits : b.host_waits,
          a.driver_calls > b.driver_calls ? a.driver_calls : b.driver_calls};
}

class StreamCounts {
 public:
  void Enqueued(uint64_t n = 1) { enqueued_.fetch_add(n, std::memory_order_relaxed); }
  void HostWait() { host_waits_.fetch_add(1, std::memory_order_relaxed); }
  void DriverCall() { driver_calls_.fetch_add(1, std::memory_order_relaxed); }

  StreamOps Read() const {
    return {enqueued_.load(std::memory_order_relaxed), host_waits_.load(std::memory_order_relaxed),
            driver_calls_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> host_waits_{0};
  std::atomic<uint64_t> driver_calls_{0};
};

}  // namespace zero
