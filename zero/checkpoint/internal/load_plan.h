// What one rank reads to load a checkpoint into its layout, in reads of
// bounded size, so that Load's host staging is bounded whatever the model's
// size (checkpoint.h: LoadOptions::staging_bytes). Resharding included:
// a chunk that straddles a piece boundary of the new layout is read whole
// and only its overlap with this rank's run is placed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/layout.h"

namespace zero::checkpoint {

// Elements [lo, hi) of `chunk` (of parameter `param`) go to unit `unit`'s
// owned piece, buffer chunk->buffer, at shard_index (in the rank's shard
// buffers, as OwnedRun::shard_index).
struct Placement {
  const ParamRecord* param;
  const ChunkRecord* chunk;
  int unit;
  uint64_t lo, hi;
  size_t shard_index;
};

// Consecutive chunks of one file, read as one span: [begin, end) is aligned
// for O_DIRECT at the start, and ends at the next alignment or the file's end.
struct ChunkRead {
  int file;
  uint64_t begin, end;
  std::vector<Placement> placements;  // in file order
};

struct LoadPlan {
  std::vector<ChunkRead> reads;  // by file, then offset
  int slots = 0;                 // host buffers, each holding one read
  size_t slot_bytes = 0;         // the longest read, aligned
  int in_flight = 0;             // reads queued to the disk at once, <= slots
  size_t staging_bytes() const { return static_cast<size_t>(slots) * slot_bytes; }
};

// Reads of at most min(read_bytes, staging_bytes / in_flight) bytes (more
// when one chunk needs more), as many buffers of that size as staging_bytes
// holds, at most `in_flight` of them read at once. InvalidArgument naming
// both sizes when staging_bytes cannot hold one chunk of this checkpoint.
absl::StatusOr<LoadPlan> PlanLoad(const Manifest& manifest, const Layout& layout, int rank,
                                  size_t staging_bytes, size_t read_bytes, int in_flight);

// Shard elements [begin, end) of `unit` (within its piece) that no parameter
// fills: alignment padding, zeroed on load as the engine keeps it.
struct Gap {
  int unit;
  size_t begin, end;  // in the rank's shard buffers
};
std::vector<Gap> PaddingGaps(const Layout& layout, int rank);

}  // namespace zero::checkpoint
