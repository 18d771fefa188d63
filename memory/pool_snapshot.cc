// DevicePool's snapshot: its mapped runs and their blocks, in the JSON shape
// of torch.cuda.memory._snapshot()["segments"].
#include "absl/strings/str_format.h"
#include "memory/pool.h"

namespace zero {

std::vector<SegmentInfo> DevicePool::Segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SegmentInfo> segments;
  for (const auto& [addr, block] : blocks_.blocks()) {
    if (segments.empty() || segments.back().address + segments.back().size != addr) {
      segments.push_back(SegmentInfo{addr, 0, {}});
    }
    segments.back().size += block.size;
    segments.back().blocks.push_back(
        BlockInfo{addr, block.size, block.requested, block.allocated, block.tag});
  }
  return segments;
}

std::string DevicePool::SnapshotJson() const {
  std::string out = absl::StrFormat("{\"device\":%d,\"segments\":[", device_);
  const char* segment_sep = "";
  for (const SegmentInfo& segment : Segments()) {
    absl::StrAppendFormat(&out, "%s{\"address\":%d,\"total_size\":%d,\"blocks\":[",
                          segment_sep, segment.address, segment.size);
    const char* block_sep = "";
    for (const BlockInfo& b : segment.blocks) {
      absl::StrAppendFormat(
          &out, "%s{\"address\":%d,\"size\":%d,\"requested_size\":%d,\"state\":\"%s\",\"tag\":\"%s\"}",
          block_sep, b.address, b.size, b.requested, b.allocated ? "active_allocated" : "inactive",
          b.allocated ? std::string(TagName(b.tag)) : "");
      block_sep = ",";
    }
    out += "]}";
    segment_sep = ",";
  }
  out += "]}";
  return out;
}

}  // namespace zero
