// What a device pool reports: bytes by state and by tag, current and peak.
// "allocated" counts rounded block bytes, "requested" what callers asked for;
// "reserved" is physical memory mapped for the pool (used or cached).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "memory/tag.h"

namespace zero {

struct TagStats {
  size_t current = 0;  // requested bytes now live
  size_t peak = 0;
  uint64_t live = 0;   // live allocations
  uint64_t total = 0;  // allocations ever
};

struct PoolStats {
  int device = 0;
  size_t capacity = 0;
  size_t allocated = 0, peak_allocated = 0;
  size_t requested = 0, peak_requested = 0;
  size_t reserved = 0, peak_reserved = 0;
  size_t cached_free = 0;         // reserved but not allocated
  size_t largest_free_block = 0;  // largest cached block
  uint64_t num_allocs = 0, num_frees = 0, num_ooms = 0;
  uint64_t num_maps = 0, num_unmaps = 0;
  uint64_t num_errors = 0;  // rejected frees and bad requests
  std::array<TagStats, kNumTags> tags{};

  const TagStats& tag(Tag t) const { return tags[static_cast<int>(t)]; }
};

// Bookkeeping every pool shares: a block of `size` bytes (rounded) serving a
// request of `requested` bytes starts / stops being live.
void CountAlloc(PoolStats& stats, size_t size, size_t requested, Tag tag);
void CountFree(PoolStats& stats, size_t size, size_t requested, Tag tag);
// Peaks restart from the current values.
void ResetPeaks(PoolStats& stats);
// `stats` as a pool reports them: with the derived cached-free bytes and the
// largest free block filled in.
PoolStats Reported(PoolStats stats, size_t largest_free_block);

// One JSON object, for experiment files.
std::string PoolStatsJson(const PoolStats& stats);

}  // namespace zero
