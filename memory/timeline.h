// A bounded trace of what a pool did, with PyTorch's snapshot action names so
// the output reads like torch.cuda.memory._snapshot()'s device_traces.
// Thread-safe. When full, the oldest events are dropped (and counted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "base/mutex.h"
#include "memory/tag.h"

namespace zero {

enum class TraceAction { kAlloc, kFreeCompleted, kSegmentMap, kSegmentUnmap, kOom };

std::string_view TraceActionName(TraceAction action);

struct TraceEvent {
  int64_t time_ns;  // steady clock, since the timeline was created
  TraceAction action;
  int device;
  uintptr_t address;
  size_t size;
  Tag tag;
  const void* stream;
};

class Timeline {
 public:
  explicit Timeline(size_t limit = size_t{1} << 20);

  void Add(TraceAction action, int device, uintptr_t address, size_t size, Tag tag,
           const void* stream);
  std::vector<TraceEvent> events() const;
  uint64_t dropped() const;

  // One line per event: time_ns,action,device,address,size,tag,stream.
  std::string ToCsv() const;
  absl::Status WriteCsv(const std::string& path) const;

 private:
  const size_t limit_;
  const int64_t start_ns_;
  mutable Mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);  // a ring once full
  size_t oldest_ ABSL_GUARDED_BY(mu_) = 0;  // where the ring starts
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zero
