// The caching pool of one device, over that device's slice of the UVA space.
//
// Blocks are carved from mapped runs of the slice: best fit by size, split on
// allocation, coalesced with free neighbours by address on free. Because the
// slice is one virtual range, a free block can grow by mapping the granules
// right after (or before) it, so a miss maps only what is missing. Trim
// unmaps every whole free granule; pointers never move.
//
// Stream-ordered reuse: a free block remembers the streams that may still
// use it; a request on another stream waits for an event on each of them.
// Thread-safe (one mutex per device). Work running on a stream must not call
// the pool: Trim synchronizes streams while holding the pool's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <mutex>
#include "memory/block_set.h"
#include "memory/pool_stats.h"
#include "memory/resource.h"
#include "memory/timeline.h"
#include "memory/uva_space.h"

namespace zero {

struct PoolOptions {
  size_t round_to = 512;             // every request rounds up to this (power of two)
  size_t timeline_limit = 1u << 20;  // events kept; 0 disables the timeline
};

// A block as the snapshot sees it; PyTorch's state names.
struct BlockInfo {
  uintptr_t address;
  size_t size;
  size_t requested;  // 0 when free
  bool allocated;
  Tag tag;
};
// A maximal run of mapped memory.
struct SegmentInfo {
  uintptr_t address;
  size_t size;
  std::vector<BlockInfo> blocks;
};

class DevicePool final : public MemoryResource {
 public:
  DevicePool(int device, UvaSpace* space, Stream* default_stream, PoolOptions options = {});
  ~DevicePool() override;  // unmaps everything it mapped
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  int device() const { return device_; }

  // Marks `ptr` as used by `stream` too, so its memory is not reused before
  // that stream's work is done (torch's Tensor.record_stream).
  absl::Status RecordStream(void* ptr, Stream* stream);

  // Unmaps every whole free granule after synchronizing the streams that
  // used it. Returns the bytes released.
  absl::StatusOr<size_t> Trim();

  PoolStats stats() const;
  void ResetPeaks();  // peaks restart from current values
  std::vector<SegmentInfo> Segments() const;
  std::string SnapshotJson() const;  // {"device":..,"segments":[..]}
  const Timeline& timeline() const { return timeline_; }

 protected:
  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) override;
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) override;

 private:
  using Block = BlockSet::Block;
  using BlockMap = BlockSet::Map;

  absl::Status CheckRequest(size_t bytes, size_t alignment) const;
  absl::StatusOr<BlockMap::iterator> Grow(size_t need) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<BlockMap::iterator> MapFree(uintptr_t addr, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<size_t> TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddUnmapped(uintptr_t addr, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeUnmapped(uintptr_t addr, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OutOfMemory(size_t bytes, Tag tag, absl::string_view why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BadFree(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  UvaSpace* const space_;
  Stream* const default_stream_;
  const PoolOptions options_;
  const uintptr_t slice_begin_, slice_end_;

  mutable std::mutex mu_;
  BlockSet blocks_ ABSL_GUARDED_BY(mu_);  // every mapped byte is in one block
  std::map<uintptr_t, size_t> unmapped_ ABSL_GUARDED_BY(mu_);  // address -> length
  PoolStats stats_ ABSL_GUARDED_BY(mu_);
  Timeline timeline_;
};

}  // namespace zero
