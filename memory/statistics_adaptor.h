// Counts what passes through to `upstream`, like RMM's
// statistics_resource_adaptor: bytes and allocations, current, peak and
// total, overall and per tag. Only successful calls count. Thread-safe;
// does not own `upstream`.
#pragma once

#include <array>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "memory/resource.h"

namespace zero {

struct Counter {
  int64_t current = 0, peak = 0, total = 0;
  void Add(int64_t n) {
    current += n;
    if (n > 0) total += n;
    if (current > peak) peak = current;
  }
};

struct ResourceStatistics {
  Counter bytes, allocations;
  std::array<Counter, kNumTags> tag_bytes;
};

class StatisticsAdaptor final : public MemoryResource {
 public:
  explicit StatisticsAdaptor(MemoryResource* upstream) : upstream_(upstream) {}
  ResourceStatistics statistics() const;

 protected:
  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) override;
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) override;

 private:
  MemoryResource* const upstream_;
  mutable Mutex mu_;
  ResourceStatistics stats_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, Tag> tags_ ABSL_GUARDED_BY(mu_);  // frees carry no tag
};

}  // namespace zero
