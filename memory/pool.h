// The caching pool of one device, over that device's slice of the UVA space.
//
// Blocks are carved from mapped runs of the slice: best fit by size, split on
// allocation, coalesced with free neighbours by address on free. Because the
// slice is one virtual range, a free block can grow by mapping the chunks
// right after (or before) it, so a miss maps only what is missing. Trim
// unmaps every whole free chunk; pointers never move.
//
// Stream-ordered reuse: a free block keeps the events recorded at its free
// on the streams that used it; a request on another stream waits for those
// not yet done (memory/caching_pool.h says exactly what is guaranteed).
// The allocation routine, stats, timeline and snapshot are CachingPool's
// (memory/caching_pool.h); this class only maps and unmaps chunks of the
// slice (memory/uva_space.h). Thread-safe (one mutex per device). Work running on a stream must not
// call the pool: Trim synchronizes streams while holding the pool's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "memory/caching_pool.h"
#include "memory/uva_space.h"

namespace zero {

using PoolOptions = CachingPoolOptions;

class DevicePool final : public CachingPool {
 public:
  DevicePool(int device, UvaSpace* space, Stream* default_stream, PoolOptions options = {});
  ~DevicePool() override;  // unmaps everything it mapped

  int device() const { return device_; }

 private:
  std::string Name() const override;
  std::string Describe() const override;
  Stream* Resolve(Stream* stream) const override {
    return stream == nullptr ? default_stream_ : stream;
  }
  absl::Status CheckStream(Stream* stream, const char* action) const override;
  absl::Status CheckOwned(void* ptr) const override;
  absl::StatusOr<BlockMap::iterator> Grow(size_t size, size_t alignment) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<size_t> TrimLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<BlockMap::iterator> MapFree(uintptr_t addr, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddUnmapped(uintptr_t addr, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeUnmapped(uintptr_t addr, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  UvaSpace* const space_;
  Stream* const default_stream_;
  const uintptr_t slice_begin_, slice_end_;
  std::map<uintptr_t, size_t> unmapped_ ABSL_GUARDED_BY(mu_);  // address -> length
};

}  // namespace zero
