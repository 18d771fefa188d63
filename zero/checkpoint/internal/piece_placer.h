// Load's second pass into this rank's owned pieces (load.cc): each read's
// chunks go in with one WritePiece per unit, every buffer at once, and the
// padding (zeroed, as the engine keeps it) goes along with the write that
// reaches it. With the state on NVMe the state file is then read and
// written once per read that touches it, not once per chunk and buffer.
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
  // `buffers`: master weights plus optimizer states (BufferCount).
  PiecePlacer(Engine& engine, int rank, int buffers);

  // Places `read`'s chunks, whose file bytes are `span`; done with `span`
  // on return.
  absl::Status Place(const ChunkRead& read, const std::byte* span);
  // Zeroes the padding no Place reached (pieces without parameters).
  absl::Status Finish();

 private:
  // `writes` into `unit`'s piece, with the pending padding they touch.
  absl::Status Write(int unit, std::vector<PieceWrite>& writes);
  void AddZeros(const Gap& gap, std::vector<PieceWrite>& writes) const;

  Engine& engine_;
  const int buffers_;
  std::vector<std::vector<Gap>> gaps_;  // per unit: padding not yet zeroed, in order
};

}  // namespace zero::checkpoint
