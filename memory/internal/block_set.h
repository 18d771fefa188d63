// The block bookkeeping every caching pool here shares (DevicePool over the
// UVA slice, offload's PinnedHostPool over host arenas): best fit by size,
// split on allocation, coalesce with free neighbours by address on free, and
// stream-ordered reuse, preferring a block whose pending uses are on the
// allocating stream (no wait): an allocated block knows the streams that use it; on
// free, an event is recorded on each of them (and on the freeing stream), and
// the free block keeps those events until a new owner is ordered after them.
//
// It only keeps books: it never maps, touches or frees memory. Blocks merge
// only within one segment, so a pool whose ranges are separate allocations
// (arenas) gives each its own segment. Not thread-safe: the owning pool's
// lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memory/stream.h"
#include "memory/tag.h"

namespace zero {

// Almost always one or two streams: no heap allocation on the hot path.
using StreamList = absl::InlinedVector<Stream*, 2>;

// Work on `stream` that may still touch a free block: everything enqueued
// there before the block was freed, marked by `event`. Of two uses on one
// stream, the one with the larger `order` (recorded later) covers the other.
struct PendingUse {
  Stream* stream;
  std::shared_ptr<Event> event;
  uint64_t order;
};
using PendingUses = absl::InlinedVector<PendingUse, 2>;

class BlockSet {
 public:
  struct Block {
    size_t size = 0;
    size_t requested = 0;  // 0 when free
    bool allocated = false;
    bool cached = false;  // freed into the pool's FrontCache: allocated here, free to callers
    Tag tag = Tag::kOther;
    uint32_t segment = 0;  // merges only with neighbours of the same segment
    StreamList users;      // allocated: streams using it (null, the host, is not listed)
    PendingUses pending;   // free: uses not known to be done (completed ones are dropped)
  };
  using Map = std::map<uintptr_t, Block>;
  using iterator = Map::iterator;

  // Every block, by address. Callers may walk it and read blocks; sizes and
  // states change only through the methods below (they keep the free index).
  Map& blocks() { return blocks_; }
  const Map& blocks() const { return blocks_; }
  bool empty() const { return blocks_.empty(); }
  size_t largest_free() const { return free_.empty() ? 0 : free_.rbegin()->first; }

  // The smallest free block holding `size` bytes at `alignment` that `user`
  // can take without waiting (MustWait); failing that, the smallest of all.
  // Past the smallest, it looks at kSameStreamLook more blocks at most, none
  // over kSameStreamSlack times its size, so fit stays near best. end() if
  // none fits.
  iterator FindFit(size_t size, size_t alignment, Stream* user);
  static constexpr int kSameStreamLook = 8;
  static constexpr size_t kSameStreamSlack = 2;
  // Takes `size` bytes at `alignment` from free block `it` for `user` (null:
  // the host); the rest stays free with the same pending uses. Returns the
  // allocated block. Order `user` after the block's uses first.
  iterator Carve(iterator it, size_t size, size_t alignment, Stream* user);
  // Adds a free block (no coalescing) / removes a free block.
  iterator InsertFree(uintptr_t addr, Block block);
  void EraseFree(iterator it);
  // Merges free block `it` with free neighbours of its segment.
  iterator Coalesce(iterator it);
  // Frees an allocated block, used last by `stream` too (null: the host):
  // records an event on `stream` and on each of its users now, then
  // coalesces. Returns the merged free block; if a record fails, the error,
  // and the block stays allocated.
  absl::StatusOr<iterator> Free(iterator it, Stream* stream);
  // Free in two halves, for a free that is booked later (the pool's front
  // cache): the events, recorded at the free (the uses not done yet), and
  // the release of the block with them.
  absl::StatusOr<PendingUses> RecordUses(const Block& block, Stream* stream);
  iterator Release(iterator it, const PendingUses& recorded);

  // The allocated block at `addr` freed with `bytes`, or the error a bad free
  // deserves (callers Annotate it with their name): NotFound (not a block
  // start, or inside one), FailedPrecondition (double free), InvalidArgument
  // (size differs from the request).
  absl::StatusOr<iterator> FindAllocated(uintptr_t addr, size_t bytes);

  // True when a use on `stream` would wait for one of the free block's
  // pending uses: one on another stream (any, for the host: null) not done.
  // Uses on `stream` itself are ordered by the stream, as PyTorch's and
  // RMM's per-stream free lists rely on.
  static bool MustWait(const Block& block, Stream* stream);
  // Orders a new use on `stream` after the free block's pending uses on other
  // streams (Stream::Wait: the host does not block). Its own stream's uses
  // need nothing: stream order covers them. A null stream is the calling
  // host thread: it blocks until those uses are done.
  static absl::Status OrderAfterUses(const Block& block, Stream* stream);
  // Blocks the host until the free block's pending uses are done (before its
  // memory is given back), and forgets them.
  static absl::Status WaitForPending(Block& block);

 private:
  Map blocks_;
  uint64_t frees_ = 0;  // orders PendingUses
  absl::btree_set<std::pair<size_t, uintptr_t>> free_;  // (size, address)
};

// Adds `stream` to `streams` once.
void AddStream(StreamList& streams, Stream* stream);
void MergeStreams(StreamList& into, const StreamList& from);
// Adds the uses of `from` that are not done to `into`, one per stream.
void MergePending(PendingUses& into, const PendingUses& from);

}  // namespace zero
