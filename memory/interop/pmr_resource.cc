#include "memory/interop/pmr_resource.h"

#include <algorithm>

#include "memory/interop/bad_alloc.h"

namespace zero {
namespace {

// std::pmr may ask for zero bytes and must get a pointer; the pool rejects
// zero, so both directions ask for one byte instead.
size_t PoolBytes(size_t bytes) { return std::max<size_t>(bytes, 1); }

}  // namespace

void* PmrResource::do_allocate(size_t bytes, size_t alignment) {
  // Never below the pool's default: device code expects 256-byte alignment.
  absl::StatusOr<void*> ptr = upstream_->Allocate(PoolBytes(bytes), tag_, stream_,
                                                  std::max(alignment, kDefaultAlignment));
  if (!ptr.ok()) throw BadAlloc(ptr.status());
  return *ptr;
}

void PmrResource::do_deallocate(void* ptr, size_t bytes, size_t /*alignment*/) {
  // The pool counts a rejected free; pmr gives no way to report it.
  (void)upstream_->Deallocate(ptr, PoolBytes(bytes), stream_);
}

bool PmrResource::do_is_equal(const std::pmr::memory_resource& other) const noexcept {
  if (this == &other) return true;
  const auto* that = dynamic_cast<const PmrResource*>(&other);
  return that != nullptr && that->upstream_ == upstream_ && that->stream_ == stream_;
}

}  // namespace zero
