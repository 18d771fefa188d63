// An owned allocation from a MemoryResource (a device pool or the pinned
// host pool): freed on the stream it was allocated on (or was handed to,
// set_stream) when destroyed or reset. Move-only.
#pragma once

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "memory/pool.h"

namespace zero {

class Buffer {
 public:
  Buffer() = default;
  static absl::StatusOr<Buffer> Allocate(MemoryResource* pool, size_t bytes, Tag tag,
                                         Stream* stream) {
    absl::StatusOr<void*> ptr = pool->Allocate(bytes, tag, stream);
    if (!ptr.ok()) return ptr.status();
    Buffer b;
    b.pool_ = pool;
    b.ptr_ = *ptr;
    b.bytes_ = bytes;
    b.stream_ = stream;
    return b;
  }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Reset();
      pool_ = std::exchange(other.pool_, nullptr);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  ~Buffer() { Reset(); }

  // A pointer the pool handed out with this size cannot be refused.
  void Reset() {
    if (ptr_ != nullptr) (void)pool_->Deallocate(ptr_, bytes_, stream_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  // Frees on `stream` from now on (torch's record_stream, for one stream):
  // for a buffer handed to another stream, which the caller has already
  // ordered after every use of the buffer on the old one.
  void set_stream(Stream* stream) { stream_ = stream; }
  Stream* stream() const { return stream_; }

  template <typename T = void>
  T* data() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  MemoryResource* pool_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Stream* stream_ = nullptr;
};

}  // namespace zero
