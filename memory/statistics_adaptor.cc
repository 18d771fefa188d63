#include "memory/statistics_adaptor.h"

#include <optional>

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
  // The tag leaves the map before the upstream free: once that returns, the
  // pool may hand `ptr` to another thread, whose tag must not be the one
  // this free takes away.
  std::optional<Tag> tag;
  {
    MutexLock lock(mu_);
    if (auto it = tags_.find(ptr); it != tags_.end()) {
      tag = it->second;
      tags_.erase(it);
    }
  }
  absl::Status status = upstream_->Deallocate(ptr, bytes, stream);
  MutexLock lock(mu_);
  if (!status.ok()) {
    if (tag) tags_[ptr] = *tag;  // still allocated: its books stay
    return status;
  }
  stats_.bytes.Add(-static_cast<int64_t>(bytes));
  stats_.allocations.Add(-1);
  if (tag) stats_.tag_bytes[static_cast<int>(*tag)].Add(-static_cast<int64_t>(bytes));
  return status;
}

ResourceStatistics StatisticsAdaptor::statistics() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace zero
