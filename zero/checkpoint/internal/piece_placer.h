// Load's second pass into this rank's owned pieces (load.cc): each read's
// chunks go in with one WritePiece per unit, every buffer at once, and the
// padding (zeroed, as the engine keeps it) goes along with the write that
// reaches it. With the state on NVMe the state file is then read and
// written once per read that touches it, not once per chunk and buffer.
// It counts what the plan still has to place per unit, so that Load can
// rebuild each unit (OwnedStateAccess::RestoreUnit) as soon as its piece is whole.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "zero/checkpoint/internal/load_plan.h"
#include "zero/checkpoint/internal/owned_state_io.h"
#include "zero/engine.h"

namespace zero::checkpoint {

class PiecePlacer {
 public:
  // `buffers`: master weights plus optimizer states (BufferCount); `plan`:
  // the reads Place will be given (each once, in any order).
  PiecePlacer(Engine& engine, int rank, int buffers, const LoadPlan& plan);

  // Places `read`'s chunks, whose file bytes are `span`; done with `span`
  // and with the stream's copies on return.
  absl::Status Place(const ChunkRead& read, const std::byte* span);
  // Units [0, n) are whole on this rank: every element the plan holds for
  // them placed, their padding zeroed.
  int units_placed() const { return units_placed_; }
  // Zeroes the padding no Place reached (pieces without parameters).
  absl::Status Finish();

 private:
  // `writes` into `unit`'s piece, with the pending padding they touch.
  absl::Status Write(int unit, std::vector<PieceWrite>& writes);
  void AddZeros(const Gap& gap, std::vector<PieceWrite>& writes) const;
  // Advances units_placed_ over the units with nothing left to place,
  // zeroing their pending padding.
  absl::Status ZeroWholeUnits();

  Engine& engine_;
  const int buffers_;
  std::vector<std::vector<Gap>> gaps_;  // per unit: padding not yet zeroed, in order
  std::vector<uint64_t> unplaced_;      // per unit: elements the plan still has to place
  int units_placed_ = 0;
};

}  // namespace zero::checkpoint
