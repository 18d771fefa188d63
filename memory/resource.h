// The one allocation interface, in the shape of RMM's device_memory_resource:
// allocate and deallocate bytes on a stream. The pool implements it, and the
// adaptors (statistics, limiting, logging) wrap any implementation.
//
// A null stream means the device's default stream. Memory is usable by work
// on `stream` at once, and by other streams after an event. Deallocate is
// stream-ordered: the bytes are reused only after earlier work on `stream`.
// Implementations are thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/stream.h"
#include "memory/tag.h"

namespace zero {

inline constexpr size_t kDefaultAlignment = 256;

class MemoryResource {
 public:
  virtual ~MemoryResource() = default;

  // Errors: InvalidArgument for a zero size or an alignment that is not a
  // power of two; ResourceExhausted (with the device's state) when full.
  absl::StatusOr<void*> Allocate(size_t bytes, Tag tag = Tag::kOther, Stream* stream = nullptr,
                                 size_t alignment = kDefaultAlignment) {
    return DoAllocate(bytes, alignment, tag, stream);
  }
  // `bytes` must be the size that was allocated. Errors leave state intact:
  // NotFound for a pointer this resource does not own, FailedPrecondition
  // for a double free, InvalidArgument for a size mismatch.
  absl::Status Deallocate(void* ptr, size_t bytes, Stream* stream = nullptr) {
    return DoDeallocate(ptr, bytes, stream);
  }

 protected:
  virtual absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                           Stream* stream) = 0;
  virtual absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) = 0;
};

}  // namespace zero
