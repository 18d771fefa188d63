#include "zero/checkpoint/internal/chunk_plan.h"

#include <algorithm>

namespace zero::checkpoint {

std::vector<OwnedRun> OwnedRuns(const Layout& layout, int rank) {
  std::vector<OwnedRun> runs;
  const std::vector<ParamSlot>& params = layout.params();
  for (int u = 0; u < static_cast<int>(layout.units().size()); ++u) {
    const Unit& unit = layout.units()[u];
    const size_t piece_begin = unit.offset + rank * unit.shard;
    const size_t piece_end = piece_begin + unit.shard;
    for (int p = unit.first_param; p < unit.end_param; ++p) {
      const size_t lo = std::max(piece_begin, params[p].offset);
      const size_t hi = std::min(piece_end, params[p].offset + params[p].numel);
      if (lo >= hi) continue;
      runs.push_back(OwnedRun{u, p, lo - params[p].offset, hi - params[p].offset,
                              unit.shard_offset + (lo - piece_begin)});
    }
  }
  return runs;
}

DataFilePlan PlanDataFile(const Layout& layout, int rank, int buffers, size_t chunk_elements,
                          size_t header_bytes) {
  DataFilePlan plan;
  plan.bytes = header_bytes;
  for (const OwnedRun& run : OwnedRuns(layout, rank)) {
    for (size_t begin = run.begin; begin < run.end; begin += chunk_elements) {
      const size_t end = std::min(run.end, begin + chunk_elements);
      for (int b = 0; b < buffers; ++b) {
        plan.chunks.push_back(PlannedChunk{run.unit, run.param, b, begin, end,
                                           run.shard_index + (begin - run.begin), plan.bytes});
        plan.bytes += (end - begin) * sizeof(float);
      }
    }
  }
  return plan;
}

}  // namespace zero::checkpoint
