// Caps the bytes live through `upstream`, like RMM's limiting_resource_adaptor:
// a request that would pass the cap fails with ResourceExhausted before it
// reaches upstream. Thread-safe; does not own `upstream`.
#pragma once

#include <cstddef>

#include "base/mutex.h"
#include "memory/resource.h"

namespace zero {

class LimitingAdaptor final : public MemoryResource {
 public:
  LimitingAdaptor(MemoryResource* upstream, size_t limit) : upstream_(upstream), limit_(limit) {}
  size_t limit() const { return limit_; }
  size_t used() const;

 protected:
  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) override;
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) override;

 private:
  MemoryResource* const upstream_;
  const size_t limit_;
  mutable Mutex mu_;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zero
