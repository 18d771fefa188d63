#include "memory/pool_stats.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace zero {

void CountAlloc(PoolStats& s, size_t size, size_t requested, Tag tag) {
  s.allocated += size;
  s.peak_allocated = std::max(s.peak_allocated, s.allocated);
  s.requested += requested;
  s.peak_requested = std::max(s.peak_requested, s.requested);
  ++s.num_allocs;
  TagStats& t = s.tags[static_cast<int>(tag)];
  t.current += requested;
  t.peak = std::max(t.peak, t.current);
  ++t.live;
  ++t.total;
}

void CountFree(PoolStats& s, size_t size, size_t requested, Tag tag) {
  s.allocated -= size;
  s.requested -= requested;
  ++s.num_frees;
  TagStats& t = s.tags[static_cast<int>(tag)];
  t.current -= requested;
  --t.live;
}

PoolStats Reported(PoolStats s, size_t largest_free_block) {
  s.cached_free = s.reserved - s.allocated;
  s.largest_free_block = largest_free_block;
  return s;
}

void ResetPeaks(PoolStats& s) {
  s.peak_allocated = s.allocated;
  s.peak_requested = s.requested;
  s.peak_reserved = s.reserved;
  for (TagStats& t : s.tags) t.peak = t.current;
}

std::string PoolStatsJson(const PoolStats& s) {
  std::string out = absl::StrFormat(
      "{\"device\":%d,\"capacity\":%d,\"allocated\":%d,\"peak_allocated\":%d,"
      "\"requested\":%d,\"peak_requested\":%d,\"reserved\":%d,\"peak_reserved\":%d,"
      "\"cached_free\":%d,\"largest_free_block\":%d,\"num_allocs\":%d,\"num_frees\":%d,"
      "\"num_ooms\":%d,\"num_maps\":%d,\"num_unmaps\":%d,\"num_errors\":%d,\"tags\":{",
      s.device, s.capacity, s.allocated, s.peak_allocated, s.requested, s.peak_requested,
      s.reserved, s.peak_reserved, s.cached_free, s.largest_free_block, s.num_allocs,
      s.num_frees, s.num_ooms, s.num_maps, s.num_unmaps, s.num_errors);
  for (int t = 0; t < kNumTags; ++t) {
    const TagStats& ts = s.tags[t];
    absl::StrAppendFormat(&out, "%s\"%s\":{\"current\":%d,\"peak\":%d,\"live\":%d,\"total\":%d}",
                          t == 0 ? "" : ",", std::string(kTagNames[t]), ts.current, ts.peak,
                          ts.live, ts.total);
  }
  out += "}}";
  return out;
}

}  // namespace zero
