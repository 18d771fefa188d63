// A caching pool of pinned host memory: the home of offloaded tensors.
//
// Blocks are carved from a few large arenas (cudaHostAlloc on cards, mmap on
// host devices, addresses only on meta) by the same allocation routine as the
// device pool (memory/caching_pool.h): this class only adds and frees arenas;
// blocks never merge across arenas. Arenas are added on demand up to `capacity` bytes and
// returned by Trim when wholly free.
//
// Stream-ordered reuse, as the device pool: a block freed on stream A is
// handed to a request on stream B only behind an event on A. Streams may be
// of any device. A null stream means the calling host thread: Allocate then
// blocks until earlier stream uses of the block are done, and Deallocate says
// the host is done with it. Thread-safe (one mutex); work running on a stream
// must not call the pool (Allocate and Trim may wait for streams under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/units.h"
#include "memory/caching_pool.h"
#include "memory/device_system.h"
#include "offload/internal/arena_source.h"

namespace zero {

struct PinnedHostPoolOptions {
  // A new arena is this large (or the request, if larger), capped by what
  // the capacity leaves: a few large arenas, since pinning is slow.
  size_t arena_bytes = 256 * kMiB;
  size_t round_to = 512;             // every request rounds up to this (power of two)
  size_t timeline_limit = 1u << 16;  // events kept; 0 disables the timeline
};

// Errors, as every CachingPool: InvalidArgument (zero size; alignment not a
// power of two or above the arena alignment), ResourceExhausted (beyond
// capacity, with the pool's state); Deallocate: NotFound (foreign pointer),
// FailedPrecondition (double free), InvalidArgument (size mismatch). State is
// intact after any. Stats report device -1; "reserved" is bytes held in
// arenas, num_maps/num_unmaps count arenas added and released; each arena is
// one segment of the snapshot.
class PinnedHostPool final : public CachingPool {
 public:
  using Options = PinnedHostPoolOptions;

  // Arenas come from the source that fits the system's kind of device.
  // InvalidArgument for a zero capacity or bad options.
  static absl::StatusOr<std::unique_ptr<PinnedHostPool>> Create(DeviceSystem* system,
                                                                size_t capacity_bytes,
                                                                Options options = {});
  static absl::StatusOr<std::unique_ptr<PinnedHostPool>> Create(
      std::unique_ptr<ArenaSource> source, size_t capacity_bytes, Options options = {});
  // Waits for the streams that used its blocks, then frees every arena.
  ~PinnedHostPool() override;

  // False on meta: pointers are addresses only and must not be dereferenced.
  bool has_bytes() const { return source_->has_bytes(); }
  std::string_view source_name() const { return source_->name(); }

 private:
  struct Arena {
    uintptr_t base = 0;
    size_t bytes = 0;
  };

  PinnedHostPool(std::unique_ptr<ArenaSource> source, size_t capacity, Options options);
  std::string Name() const override;
  std::string Describe() const override;
  std::string ReservedDetail() const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<BlockMap::iterator> Grow(size_t size, size_t alignment) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<size_t> TrimLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<ArenaSource> source_;
  const size_t arena_bytes_;
  std::map<uint32_t, Arena> arenas_ ABSL_GUARDED_BY(mu_);  // by segment id
  uint32_t next_segment_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zero
