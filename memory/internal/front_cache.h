// Blocks freed on the only stream that used them, kept aside for that
// stream's next request of the same rounded size (RMM's per-stream free
// lists, PyTorch's block pools): taking one back needs no wait (stream
// order covers the reuse), no split and no coalescing, so the pool's
// allocate+free pair stays near malloc's. The free's events are recorded
// at the free all the same (on an idle host stream, none), so a block
// flushed later makes other streams wait for the work before its free
// only. A cached block stays allocated in the BlockSet (marked cached) and
// counts as free in the statistics; on any other request the pool flushes
// the cache into the free blocks first, so best fit and coalescing see
// them as without the cache. Small and bounded (kSlots), newest first. Not
// thread-safe: the owning pool's lock guards it.
#pragma once

#include <array>
#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "memory/internal/block_set.h"
#include "memory/stream.h"

namespace zero {

class FrontCache {
 public:
  static constexpr int kSlots = 16;
  struct Entry {
    Stream* stream = nullptr;  // the one stream that used it (null: the host)
    size_t size = 0;           // rounded, as the block's
    BlockSet::iterator block;
    // Its uses recorded at the free (BlockSet::RecordUses): what another
    // stream waits for once the block is flushed, not later work.
    PendingUses uses;
  };

  // The newest entry for `stream` of exactly `size` at `alignment`, removed.
  std::optional<Entry> Take(Stream* stream, size_t size, size_t alignment) {
    for (int i = count_ - 1; i >= 0; --i) {
      const Entry& e = entries_[i];
      if (e.stream != stream || e.size != size || e.block->first % alignment != 0) continue;
      Entry found = std::move(entries_[i]);
      for (int j = i; j + 1 < count_; ++j) entries_[j] = std::move(entries_[j + 1]);
      --count_;
      return found;
    }
    return std::nullopt;
  }

  // Keeps `entry`; when full, the oldest entry goes out, for the pool to
  // free into its blocks.
  std::optional<Entry> Put(Entry entry) {
    std::optional<Entry> evicted;
    if (count_ == kSlots) {
      evicted = std::move(entries_[0]);
      for (int j = 0; j + 1 < count_; ++j) entries_[j] = std::move(entries_[j + 1]);
      --count_;
    }
    entries_[count_++] = std::move(entry);
    return evicted;
  }

  // Everything, oldest first; the cache is empty after.
  std::vector<Entry> TakeAll() {
    std::vector<Entry> all(std::make_move_iterator(entries_.begin()),
                           std::make_move_iterator(entries_.begin() + count_));
    count_ = 0;
    return all;
  }

  bool empty() const { return count_ == 0; }
  size_t largest() const {
    size_t most = 0;
    for (int i = 0; i < count_; ++i) most = entries_[i].size > most ? entries_[i].size : most;
    return most;
  }

 private:
  std::array<Entry, kSlots> entries_{};
  int count_ = 0;
};

}  // namespace zero
