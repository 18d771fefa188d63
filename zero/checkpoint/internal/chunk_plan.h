// Which elements a rank owns, in parameter terms, and how its data file lays
// them out. Both follow from the layout alone, so every rank can compute
// every other rank's plan: rank 0 writes the manifest from the plans plus the
// checksums the ranks send it, and no offsets travel between ranks.
//
// A chunk is one buffer (0: fp32 master weights, 1 + i: optimizer state i)
// of one run of consecutive elements of one parameter inside one owned
// piece, at most `chunk_elements` long. Chunks never hold padding and never
// span two parameters, so a checkpoint is addressed by (parameter name,
// element range) and loads into any layout. The data file holds the header,
// then the chunks in order: unit, parameter, element range, buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zero/layout.h"

namespace zero::checkpoint {

// Parameter elements [begin, end) that `rank` owns, at `shard_index` in its
// shard buffers (OwnedStateAccess::pieces(unit) holds elements from
// units[unit].shard_offset on).
struct OwnedRun {
  int unit;
  int param;
  size_t begin, end;
  size_t shard_index;
};

// In unit order, then parameter order; runs of one unit are contiguous.
std::vector<OwnedRun> OwnedRuns(const Layout& layout, int rank);

struct PlannedChunk {
  int unit;
  int param;
  int buffer;
  size_t begin, end;   // parameter elements
  size_t shard_index;  // of `begin`, in the rank's shard buffers
  uint64_t offset;     // byte offset of the data in the file
};

struct DataFilePlan {
  std::vector<PlannedChunk> chunks;
  uint64_t bytes = 0;  // the whole file, header included
};

// `header_bytes` precede the first chunk. chunk_elements >= 1.
DataFilePlan PlanDataFile(const Layout& layout, int rank, int buffers, size_t chunk_elements,
                          size_t header_bytes);

}  // namespace zero::checkpoint
