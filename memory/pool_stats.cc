#include "memory/pool_stats.h"

#include "absl/strings/str_format.h"

namespace zero {

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
