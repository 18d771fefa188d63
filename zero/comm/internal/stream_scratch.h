// Scratch memory for one collective: taken from a resource on the call's
// stream, given back in stream order when the holder goes (after the work
// enqueued on the stream that uses it).
#pragma once

#include <cstddef>

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
    if (used_ == kMaxPieces) return absl::InternalError("StreamScratch: too many pieces");
    ASSIGN_OR_RETURN(void* ptr, resource_->Allocate(bytes, Tag::kCommunication, stream_));
    pieces_[used_++] = {ptr, bytes};
    return ptr;
  }

 private:
  struct Piece {
    void* ptr;
    size_t bytes;
  };
  MemoryResource* resource_;
  Stream* stream_;
  static constexpr int kMaxPieces = 6;  // the most any collective here takes
  Piece pieces_[kMaxPieces] = {};
  int used_ = 0;
};

}  // namespace zero
