#include "memory/limiting_adaptor.h"

#include "absl/strings/str_format.h"
#include "base/units.h"

namespace zero {

size_t LimitingAdaptor::used() const {
  MutexLock lock(mu_);
  return used_;
}

absl::StatusOr<void*> LimitingAdaptor::DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                                  Stream* stream) {
  {
    // Reserve first so two threads cannot both slip under the cap.
    MutexLock lock(mu_);
    if (bytes > limit_ - used_) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "limit of %s reached: %s in use, %s requested for %s", FormatBytes(limit_),
          FormatBytes(used_), FormatBytes(bytes), std::string(TagName(tag))));
    }
    used_ += bytes;
  }
  absl::StatusOr<void*> ptr = upstream_->Allocate(bytes, tag, stream, alignment);
  if (!ptr.ok()) {
    MutexLock lock(mu_);
    used_ -= bytes;
  }
  return ptr;
}

absl::Status LimitingAdaptor::DoDeallocate(void* ptr, size_t bytes, Stream* stream) {
  absl::Status status = upstream_->Deallocate(ptr, bytes, stream);
  if (status.ok()) {
    MutexLock lock(mu_);
    used_ -= bytes;
  }
  return status;
}

}  // namespace zero
