// Thrust allocators over a MemoryResource (a DevicePool or an adaptor over
// one): for Thrust containers and as the temporary-storage allocator of an
// execution policy, e.g. thrust::sort(thrust::cuda::par(alloc).on(s), ...) or,
// on host devices, thrust::cpp::par(alloc). Does not own the resource;
// resource and stream must outlive every allocator and allocation.
//
//   ThrustAllocator<T>        raw T* pointers: host_vector, execution policies.
//   ThrustDeviceAllocator<T>  thrust::device_ptr<T>: device_vector, so Thrust
//                             runs algorithms on the device system.
//
// Stream: memory is stream-ordered on the allocator's stream (null: the
// device's default stream); give the policy the same stream. Failure throws
// BadAlloc (a std::bad_alloc carrying the pool's status), as Thrust's own
// allocators do; a rejected deallocate is counted by the pool, not thrown.
// Copies are cheap and thread-safe; equal allocators can free each other's
// memory (same resource and stream).
#pragma once

#include <cstddef>
#include <type_traits>

#include <thrust/device_ptr.h>
#include <thrust/memory.h>

#include "memory/interop/bad_alloc.h"
#include "memory/resource.h"
#include "memory/stream.h"
#include "memory/tag.h"

namespace zero {

template <typename T>
using RawPointer = T*;

template <typename T, template <typename> class Pointer>
class BasicThrustAllocator {
 public:
  using value_type = T;
  using pointer = Pointer<T>;
  using const_pointer = Pointer<const T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  // Containers keep their allocator on copy, move and swap.
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  template <typename U>
  struct rebind {
    using other = BasicThrustAllocator<U, Pointer>;
  };

  explicit BasicThrustAllocator(MemoryResource* resource, Stream* stream = nullptr,
                                Tag tag = Tag::kOther)
      : resource_(resource), stream_(stream), tag_(tag) {}
  template <typename U>
  BasicThrustAllocator(const BasicThrustAllocator<U, Pointer>& other)  // NOLINT: rebinding
      : resource_(other.resource()), stream_(other.stream()), tag_(other.tag()) {}

  pointer allocate(size_type n) {
    if (n > static_cast<size_type>(-1) / sizeof(T)) {
      throw BadAlloc(absl::InvalidArgumentError("Thrust allocation size overflows"));
    }
    absl::StatusOr<void*> ptr = resource_->Allocate(Bytes(n), tag_, stream_, Alignment());
    if (!ptr.ok()) throw BadAlloc(ptr.status());
    return pointer(static_cast<T*>(*ptr));
  }

  void deallocate(pointer p, size_type n) noexcept {
    (void)resource_->Deallocate(static_cast<void*>(thrust::raw_pointer_cast(p)), Bytes(n),
                                stream_);
  }

  MemoryResource* resource() const { return resource_; }
  Stream* stream() const { return stream_; }
  Tag tag() const { return tag_; }

  template <typename U>
  bool operator==(const BasicThrustAllocator<U, Pointer>& other) const {
    return resource_ == other.resource() && stream_ == other.stream();
  }
  template <typename U>
  bool operator!=(const BasicThrustAllocator<U, Pointer>& other) const {
    return !(*this == other);
  }

 private:
  // The pool rejects zero bytes; an empty request still needs a pointer.
  static size_type Bytes(size_type n) { return n == 0 ? 1 : n * sizeof(T); }
  static size_t Alignment() {
    return alignof(T) > kDefaultAlignment ? alignof(T) : kDefaultAlignment;
  }

  MemoryResource* resource_;
  Stream* stream_;
  Tag tag_;
};

template <typename T>
using ThrustAllocator = BasicThrustAllocator<T, RawPointer>;
template <typename T>
using ThrustDeviceAllocator = BasicThrustAllocator<T, thrust::device_ptr>;

}  // namespace zero
