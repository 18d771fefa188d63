#include "zero/checkpoint/internal/load_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "base/direct_file.h"
#include "zero/checkpoint/internal/chunk_plan.h"

namespace zero::checkpoint {
namespace {

constexpr uint64_t kAlign = DirectFile::kAlignment;

uint64_t ChunkEnd(const ChunkRecord& c) { return c.offset + (c.end - c.begin) * sizeof(float); }

// Every chunk overlapping this rank's runs, with the overlap.
std::vector<Placement> Placements(const Manifest& manifest, const Layout& layout, int rank) {
  std::vector<Placement> out;
  for (const OwnedRun& run : OwnedRuns(layout, rank)) {
    const ParamRecord& param = manifest.params[run.param];
    for (int b = 0; b < manifest.buffers(); ++b) {
      // Chunks are sorted by (buffer, begin): the first that ends past run.begin.
      auto it =
          std::partition_point(param.chunks.begin(), param.chunks.end(), [&](const ChunkRecord& c) {
            return c.buffer < b || (c.buffer == b && c.end <= run.begin);
          });
      for (; it != param.chunks.end() && it->buffer == b && it->begin < run.end; ++it) {
        const uint64_t lo = std::max<uint64_t>(it->begin, run.begin);
        const uint64_t hi = std::min<uint64_t>(it->end, run.end);
        out.push_back({&param, &*it, run.unit, lo, hi, run.shard_index + (lo - run.begin)});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Placement& a, const Placement& b) {
    return std::pair(a.chunk->file, a.chunk->offset) < std::pair(b.chunk->file, b.chunk->offset);
  });
  return out;
}

// Host bytes a read of file bytes [first, last) needs: whole aligned blocks.
uint64_t SpanBytes(uint64_t first, uint64_t last) {
  return RoundUpToAlignment(last) - first / kAlign * kAlign;
}

}  // namespace

absl::StatusOr<LoadPlan> PlanLoad(const Manifest& manifest, const Layout& layout, int rank,
                                  size_t staging_bytes, size_t read_bytes, int in_flight) {
  const std::vector<Placement> placements = Placements(manifest, layout, rank);
  uint64_t one_chunk = 0;
  for (const Placement& p : placements) {
    one_chunk = std::max(one_chunk, SpanBytes(p.chunk->offset, ChunkEnd(*p.chunk)));
  }
  LoadPlan plan;
  if (placements.empty()) return plan;
  if (staging_bytes < one_chunk) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the staging budget of %d bytes cannot hold one chunk of this checkpoint (%d bytes with "
        "alignment): raise LoadOptions::staging_bytes",
        staging_bytes, one_chunk));
  }
  in_flight = std::max(in_flight, 1);
  const uint64_t limit = std::max<uint64_t>(
      one_chunk, std::min<uint64_t>(read_bytes, staging_bytes / in_flight) / kAlign * kAlign);
  for (const Placement& p : placements) {
    ChunkRead* last = plan.reads.empty() ? nullptr : &plan.reads.back();
    const bool extends = last != nullptr && last->file == p.chunk->file &&
                         ChunkEnd(*last->placements.back().chunk) == p.chunk->offset &&
                         SpanBytes(last->begin, ChunkEnd(*p.chunk)) <= limit;
    if (!extends) {
      plan.reads.push_back({p.chunk->file, p.chunk->offset / kAlign * kAlign, 0, {}});
      last = &plan.reads.back();
    }
    last->placements.push_back(p);
    last->end =
        std::min(RoundUpToAlignment(ChunkEnd(*p.chunk)), manifest.files[p.chunk->file].bytes);
    plan.slot_bytes = std::max<size_t>(plan.slot_bytes, SpanBytes(last->begin, last->end));
  }
  plan.slots = static_cast<int>(
      std::min<uint64_t>(staging_bytes / plan.slot_bytes, plan.reads.size()));
  plan.in_flight = std::min(in_flight, plan.slots);
  return plan;
}

std::vector<Gap> PaddingGaps(const Layout& layout, int rank) {
  std::vector<Gap> gaps;
  const std::vector<OwnedRun> runs = OwnedRuns(layout, rank);
  size_t r = 0;
  for (int u = 0; u < static_cast<int>(layout.units().size()); ++u) {
    const Unit& unit = layout.units()[u];
    size_t at = unit.shard_offset;
    for (; r < runs.size() && runs[r].unit == u; ++r) {
      if (runs[r].shard_index > at) gaps.push_back({u, at, runs[r].shard_index});
      at = runs[r].shard_index + (runs[r].end - runs[r].begin);
    }
    if (at < unit.shard_offset + unit.shard)
      gaps.push_back({u, at, unit.shard_offset + unit.shard});
  }
  return gaps;
}

}  // namespace zero::checkpoint
