#include "zero/checkpoint/internal/piece_placer.h"

#include <algorithm>
#include <map>

#include "base/status_macros.h"

namespace zero::checkpoint {

PiecePlacer::PiecePlacer(Engine& engine, int rank, int buffers, const LoadPlan& plan)
    : engine_(engine),
      buffers_(buffers),
      gaps_(engine.layout().units().size()),
      unplaced_(gaps_.size(), 0) {
  for (const Gap& gap : PaddingGaps(engine.layout(), rank)) gaps_[gap.unit].push_back(gap);
  for (const ChunkRead& read : plan.reads) {
    for (const Placement& p : read.placements) unplaced_[p.unit] += p.hi - p.lo;
  }
}

absl::Status PiecePlacer::Place(const ChunkRead& read, const std::byte* span) {
  const Layout& layout = engine_.layout();
  std::map<int, std::vector<PieceWrite>> by_unit;
  for (const Placement& p : read.placements) {
    const float* chunk = reinterpret_cast<const float*>(span + (p.chunk->offset - read.begin));
    by_unit[p.unit].push_back({p.chunk->buffer, p.shard_index - layout.units()[p.unit].shard_offset,
                               p.hi - p.lo, chunk + (p.lo - p.chunk->begin)});
  }
  for (auto& [unit, writes] : by_unit) RETURN_IF_ERROR(Write(unit, writes));
  for (const Placement& p : read.placements) unplaced_[p.unit] -= p.hi - p.lo;
  RETURN_IF_ERROR(ZeroWholeUnits());
  return engine_.stream()->Synchronize();
}

absl::Status PiecePlacer::Finish() {
  // Every read was placed; units no read reached (padding only) are whole too.
  for (uint64_t& left : unplaced_) left = 0;
  RETURN_IF_ERROR(ZeroWholeUnits());
  return engine_.stream()->Synchronize();
}

absl::Status PiecePlacer::ZeroWholeUnits() {
  for (; units_placed_ < static_cast<int>(gaps_.size()) && unplaced_[units_placed_] == 0;
       ++units_placed_) {
    std::vector<PieceWrite> writes;
    for (const Gap& gap : gaps_[units_placed_]) AddZeros(gap, writes);
    gaps_[units_placed_].clear();
    if (!writes.empty()) RETURN_IF_ERROR(WritePiece(engine_, units_placed_, writes));
  }
  return absl::OkStatus();
}

// Padding sits beside parameter elements, so a gap touching what this write
// spans costs the pass a few elements more, and no pass of its own.
absl::Status PiecePlacer::Write(int unit, std::vector<PieceWrite>& writes) {
  size_t lo = writes[0].at, hi = 0;
  for (const PieceWrite& w : writes) {
    lo = std::min(lo, w.at);
    hi = std::max(hi, w.at + w.count);
  }
  const size_t base = engine_.layout().units()[unit].shard_offset;
  std::vector<Gap>& pending = gaps_[unit];
  auto touches = [&](const Gap& gap) { return gap.begin - base <= hi && gap.end - base >= lo; };
  for (const Gap& gap : pending) {
    if (touches(gap)) AddZeros(gap, writes);
  }
  pending.erase(std::remove_if(pending.begin(), pending.end(), touches), pending.end());
  return WritePiece(engine_, unit, writes);
}

void PiecePlacer::AddZeros(const Gap& gap, std::vector<PieceWrite>& writes) const {
  const size_t at = gap.begin - engine_.layout().units()[gap.unit].shard_offset;
  for (int b = 0; b < buffers_; ++b) writes.push_back({b, at, gap.end - gap.begin, nullptr});
}

}  // namespace zero::checkpoint
