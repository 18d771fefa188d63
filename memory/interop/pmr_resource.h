// std::pmr::memory_resource over a MemoryResource (a DevicePool or an adaptor
// over one), so std::pmr containers draw from the pool on one stream with one
// tag. Does not own `upstream`; `upstream` and `stream` must outlive it.
//
// Contract differences from the rest of memory/: do_allocate throws BadAlloc
// (a std::bad_alloc carrying the pool's status) on failure, because that is
// the only failure std::pmr knows. do_deallocate cannot fail loudly: a bad
// free is counted by the pool (PoolStats::num_errors) and otherwise ignored.
// Two adaptors are equal when they share upstream and stream, whatever the
// tag, since either can free the other's memory. Thread-safe as upstream is.
//
// Memory on a card is not host-addressable: only use containers whose
// elements the host never touches there (pmr containers construct elements
// on the host), i.e. host devices, or cards for raw byte buffers.
#pragma once

#include <cstddef>
#include <memory_resource>

#include "memory/resource.h"
#include "memory/stream.h"
#include "memory/tag.h"

namespace zero {

class PmrResource final : public std::pmr::memory_resource {
 public:
  // A null stream is the device's default stream.
  explicit PmrResource(MemoryResource* upstream, Stream* stream = nullptr,
                       Tag tag = Tag::kOther)
      : upstream_(upstream), stream_(stream), tag_(tag) {}

  MemoryResource* upstream() const { return upstream_; }
  Stream* stream() const { return stream_; }
  Tag tag() const { return tag_; }

 private:
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* ptr, size_t bytes, size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override;

  MemoryResource* const upstream_;
  Stream* const stream_;
  const Tag tag_;
};

}  // namespace zero
