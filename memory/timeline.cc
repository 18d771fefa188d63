#include "memory/timeline.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "base/atomic_file.h"

namespace zero {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string_view TraceActionName(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc: return "alloc";
    case TraceAction::kFreeCompleted: return "free_completed";
    case TraceAction::kSegmentMap: return "segment_map";
    case TraceAction::kSegmentUnmap: return "segment_unmap";
    case TraceAction::kOom: return "oom";
  }
  return "?";
}

Timeline::Timeline(size_t limit) : limit_(limit), start_ns_(NowNs()) {}

void Timeline::Add(TraceAction action, int device, uintptr_t address, size_t size, Tag tag,
                   const void* stream) {
  if (limit_ == 0) return;
  TraceEvent event{NowNs() - start_ns_, action, device, address, size, tag, stream};
  MutexLock lock(mu_);
  if (events_.size() < limit_) {
    events_.push_back(event);
    return;
  }
  // Full: overwrite the oldest. A ring, not a deque: no chunk is allocated
  // and freed every few events on the pool's hot path.
  events_[oldest_] = event;
  oldest_ = (oldest_ + 1) % limit_;
  ++dropped_;
}

std::vector<TraceEvent> Timeline::events() const {
  MutexLock lock(mu_);
  std::vector<TraceEvent> ordered(events_.begin() + oldest_, events_.end());
  ordered.insert(ordered.end(), events_.begin(), events_.begin() + oldest_);
  return ordered;
}

uint64_t Timeline::dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

std::string Timeline::ToCsv() const {
  std::string out = "time_ns,action,device,address,size,tag,stream\n";
  for (const TraceEvent& e : events()) {
    absl::StrAppendFormat(&out, "%d,%s,%d,%#x,%d,%s,%p\n", e.time_ns,
                          std::string(TraceActionName(e.action)), e.device, e.address, e.size,
                          std::string(TagName(e.tag)), e.stream);
  }
  return out;
}

absl::Status Timeline::WriteCsv(const std::string& path) const {
  return WriteFileAtomically(path, ToCsv());
}

}  // namespace zero
