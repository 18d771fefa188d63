// The caching pool algorithm, written once for every kind of memory: the
// device pool over a UVA slice (memory/pool.h) and the pinned host pool over
// host arenas (offload/host_pool.h) differ only in how they get and give back
// memory, which is all a subclass supplies (RMM's
// stream_ordered_memory_resource has the same shape).
//
// The routine: validate the request, round it, best fit from the free blocks,
// on a miss grow (and trim and grow once more when full), order the block
// after its pending uses, split, count. Frees are checked (foreign, interior,
// double, size mismatch), counted and coalesced. Every action goes to the
// timeline; stats, peaks and the snapshot read the same books.
//
// Stream-ordered reuse, decided at free time (PyTorch's caching allocator
// records its events when a block is freed, too): Deallocate on stream S
// records an event on S and on every stream the block was used on (the one
// it was allocated on and those given to RecordStream), at that moment. A
// later allocation on stream T that gets the block makes T wait for those
// events that are not done yet (Stream::Wait: the host does not block; T's
// own events need nothing, stream order covers them); on the host thread (a
// null stream, where Resolve leaves it null) the allocation blocks until they
// are done. So bytes freed while work on any of their streams still reads or
// writes them are never touched by the next owner's work before that work
// ends, and work enqueued on those streams after the free is not waited for.
// A block freed on the only stream that used it goes to a small front cache
// (memory/internal/front_cache.h) that the same stream's next request of its
// rounded size takes back with no event, split or coalescing; any other
// request (and a trim) flushes the cache into the free blocks first (events
// recorded then), so fit and coalescing are as without it.
// Among the free blocks that fit, the pool prefers the smallest one the
// allocating stream can take without a wait (its pending uses are on that
// stream, or done), as PyTorch's per-stream pools and RMM's per-stream free
// lists do, but only near the best fit (BlockSet::FindFit: a few blocks, at
// most twice its size); otherwise it takes the best fit and waits. Meta
// devices' events are always done, so their fit, and the footprint
// experiment's peaks, stay plain best fit. Events come from each stream's event
// pool (memory/event_pool.h); done ones are dropped at free and coalescing.
//
// Thread-safe: one mutex guards the books and every hook runs under it. Work
// running on a stream must not call the pool: Trim (and an allocation that
// must wait for a stream, on the host) block under the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "memory/internal/block_set.h"
#include "memory/internal/front_cache.h"
#include "memory/pool_stats.h"
#include "memory/resource.h"
#include "memory/timeline.h"

namespace zero {

struct CachingPoolOptions {
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
// A maximal run of contiguous blocks (a mapped run, or one arena).
struct SegmentInfo {
  uintptr_t address;
  size_t size;
  std::vector<BlockInfo> blocks;
};

class CachingPool : public MemoryResource {
 public:
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // InvalidArgument unless round_to is a power of two no larger than
  // `max_alignment` (blocks are carved at multiples of it: 0 made every
  // request a 0-byte block, so two allocations shared an address). `what`
  // names the pool in the message. Subclasses' factories call it.
  static absl::Status CheckOptions(const CachingPoolOptions& options, size_t max_alignment,
                                   std::string_view what);

  // Marks `ptr` as used by `stream` too (torch's Tensor.record_stream): the
  // free then records an event on `stream` as well, so the memory is not
  // reused before the work enqueued there until the free is done. `stream`
  // may belong to another device (a peer reading it). Null: Resolve's meaning.
  absl::Status RecordStream(void* ptr, Stream* stream);

  // Frees the front cache's blocks into the free blocks, coalesced (events
  // recorded now): what growing and trimming do first. For snapshots and
  // tests that look at coalescing.
  void FlushCache();

  // Gives back every free range the subclass can release, after synchronizing
  // the streams that used it. Returns the bytes released.
  absl::StatusOr<size_t> Trim();

  PoolStats stats() const;
  void ResetPeaks();  // peaks restart from current values
  std::vector<SegmentInfo> Segments() const;
  std::string SnapshotJson() const;  // {"device":..,"segments":[..]}
  const Timeline& timeline() const { return timeline_; }
  size_t capacity() const { return capacity_; }

 protected:
  using Block = BlockSet::Block;
  using BlockMap = BlockSet::Map;

  // `device` is what stats and the timeline name (-1: host memory);
  // `max_alignment` the largest alignment a request may ask for.
  CachingPool(int device, size_t capacity, size_t max_alignment, CachingPoolOptions options);

  absl::StatusOr<void*> DoAllocate(size_t bytes, size_t alignment, Tag tag,
                                   Stream* stream) final;
  absl::Status DoDeallocate(void* ptr, size_t bytes, Stream* stream) final;

  // --- What a subclass supplies; each runs under mu_. ---
  // The start of every message: "device 0", "pinned host pool".
  virtual std::string Name() const = 0;
  // Name() with the kind of memory, for out-of-memory reports.
  virtual std::string Describe() const = 0;
  // What a null stream means (a device's default stream; the host thread).
  virtual Stream* Resolve(Stream* stream) const { return stream; }
  // InvalidArgument when `stream` may not use this memory.
  virtual absl::Status CheckStream(Stream* /*stream*/, const char* /*action*/) const {
    return absl::OkStatus();
  }
  // NotFound for an address outside the pool's ranges, with a better message
  // than "not a block" (e.g. which device owns it).
  virtual absl::Status CheckOwned(void* /*ptr*/) const { return absl::OkStatus(); }
  // A free block of at least `size` bytes at `alignment`: map or add memory
  // (through AddMapped). ResourceExhausted when there is no room; the pool
  // then trims and asks once more.
  virtual absl::StatusOr<BlockMap::iterator> Grow(size_t size, size_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Gives back what it can of the free blocks (through Released).
  virtual absl::StatusOr<size_t> TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Appended to the reserved bytes in an out-of-memory report.
  virtual std::string ReservedDetail() const { return ""; }

  // --- For subclasses, under mu_. ---
  // Books `bytes` of new memory at `addr` as a free block of `segment`,
  // coalesced with free neighbours of the same segment.
  BlockMap::iterator AddMapped(uintptr_t addr, size_t bytes, uint32_t segment = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Books `bytes` at `addr` as given back (the subclass removed the blocks).
  void Released(uintptr_t addr, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for every stream that used any block (before teardown).
  void SynchronizeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int device_;
  const size_t capacity_;
  const size_t max_alignment_;
  const CachingPoolOptions options_;
  mutable Mutex mu_;
  BlockSet blocks_ ABSL_GUARDED_BY(mu_);  // every byte the pool holds is in one block
  PoolStats stats_ ABSL_GUARDED_BY(mu_);
  Timeline timeline_;

 private:
  FrontCache front_ ABSL_GUARDED_BY(mu_);  // same-stream reuse without the best-fit search
  absl::Status CheckRequest(size_t bytes, size_t alignment) const;
  absl::StatusOr<BlockMap::iterator> GrowOrTrim(size_t size, size_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<BlockMap::iterator> FitOrGrow(size_t bytes, size_t size, size_t alignment,
                                               Tag tag, Stream* stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static bool OnlyUsedOn(const Block& block, Stream* stream);
  void FlushFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeCached(const FrontCache::Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OutOfMemory(size_t bytes, Tag tag, absl::string_view why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Rejected(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace zero
