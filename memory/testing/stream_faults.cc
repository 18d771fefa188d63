#include "memory/testing/stream_faults.h"

#include <atomic>
#include <mutex>

namespace zero {
namespace {

struct Fault {
  std::mutex mu;
  std::atomic<bool> armed{false};  // the fast path when no fault is set
  int target = 0;
  const Stream* only = nullptr;
  int seen = 0;
  bool dropped = false;
};

Fault& TheFault() {
  static Fault* fault = new Fault();  // never destroyed: streams may outlive statics
  return *fault;
}

// The HostWaitFilter while a DroppedStreamWait is alive: true when this call
// is the one to drop.
bool DropThisWait(const Stream* stream) {
  Fault& f = TheFault();
  if (!f.armed.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(f.mu);
  if (!f.armed.load(std::memory_order_relaxed)) return false;
  if (f.only != nullptr && f.only != stream) return false;
  if (++f.seen != f.target) return false;
  f.dropped = true;
  return true;
}

}  // namespace

DroppedStreamWait::DroppedStreamWait(int n, const Stream* only) {
  Fault& f = TheFault();
  std::lock_guard<std::mutex> lock(f.mu);
  f.target = n;
  f.only = only;
  f.seen = 0;
  f.dropped = false;
  f.armed.store(n > 0, std::memory_order_release);
  SetHostWaitFilter(&DropThisWait);
}

DroppedStreamWait::~DroppedStreamWait() {
  SetHostWaitFilter(nullptr);
  Fault& f = TheFault();
  std::lock_guard<std::mutex> lock(f.mu);
  f.armed.store(false, std::memory_order_release);
}

int DroppedStreamWait::waits_seen() const {
  Fault& f = TheFault();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.seen;
}

bool DroppedStreamWait::dropped() const {
  Fault& f = TheFault();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.dropped;
}

}  // namespace zero
