// Scratch memory for one collective: taken from a resource on the call's
// stream, given back in stream order when the holder goes (after the work
// enqueued on the stream that uses it).
#pragma once

#include <cstddef>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "memory/resource.h"
#include "memory/tag.h"

namespace zero {

class StreamScratch {
 public:
  StreamScratch(MemoryResource* resource, Stream* stream) : resource_(resource), stream_(stream) {}
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    for (const Piece& p : pieces_) resource_->Deallocate(p.ptr, p.bytes, stream_).IgnoreError();
  }

  // `bytes` more (null for 0), tagged communication.
  absl::StatusOr<void*> Get(size_t bytes) {
    if (bytes == 0) return nullptr;
    ASSIGN_OR_RETURN(void* ptr, resource_->Allocate(bytes, Tag::kCommunication, stream_));
    pieces_.push_back({ptr, bytes});
    return ptr;
  }

 private:
  struct Piece {
    void* ptr;
    size_t bytes;
  };
  MemoryResource* resource_;
  Stream* stream_;
  absl::InlinedVector<Piece, 6> pieces_;  // 6: the most any collective here takes
};

}  // namespace zero
