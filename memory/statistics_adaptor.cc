#include "memory/statistics_adaptor.h"

namespace zero {

absl::StatusOr<void*> StatisticsAdaptor::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                                    Stream* stream) {
  absl::StatusOr<void*> ptr = upstream_->Allocate(bytes, tag, stream, alignment);
  if (ptr.ok()) {
    MutexLock lock(mu_);
    stats_.bytes.Add(static_cast<int64_t>(bytes));
    stats_.allocations.Add(1);
    stats_.tag_bytes[static_cast<int>(tag)].Add(static_cast<int64_t>(bytes));
    tags_[*ptr] = tag;
  }
  return ptr;
}

absl::Status StatisticsAdaptor::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  absl::Status status = upstream_->Deallocate(ptr, bytes, stream);
  if (status.ok()) {
    MutexLock lock(mu_);
    stats_.bytes.Add(-static_cast<int64_t>(bytes));
    stats_.allocations.Add(-1);
    if (auto it = tags_.find(ptr); it != tags_.end()) {
      stats_.tag_bytes[static_cast<int>(it->second)].Add(-static_cast<int64_t>(bytes));
      tags_.erase(it);
    }
  }
  return status;
}

ResourceStatistics StatisticsAdaptor::statistics() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace zero
