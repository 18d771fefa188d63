// Reads a checkpoint's chunks, each checked against the manifest before its
// values are handed out: Load and the consolidation tool never use a byte
// that failed its CRC-32C. A data file is opened on first use and checked
// then (its size against the manifest, its header's rank, world size and
// model), so a reader touches only the files it needs, and a few are kept
// open (data_files.h).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "zero/checkpoint/internal/data_files.h"
#include "zero/checkpoint/internal/manifest.h"

namespace zero::checkpoint {

// The checks every reader makes, shared with Load's streaming reads
// (chunk_stream.h). Data file `index` of `manifest` at `path`, `size` bytes,
// starting with `header` (kDataHeaderBytes): DataLoss naming the file when
// the size, the header's rank and world size or the model differ.
absl::Status CheckDataFile(const Manifest& manifest, int index, uint64_t size,
                           std::string_view header, const std::string& path);
// DataLoss naming the file, parameter, buffer and range when `data` (the
// chunk's bytes) fails the chunk's CRC-32C.
absl::Status CheckChunk(const std::string& path, const ParamRecord& param, const ChunkRecord& chunk,
                        const void* data);

class VerifiedReader {
 public:
  // `manifest` (parsed, so its chunks lie inside the recorded file sizes)
  // must outlive the reader.
  VerifiedReader(std::string folder, const Manifest& manifest);

  // The values of `chunk` of `param`, valid until the next Read. NotFound
  // for a missing file; DataLoss, naming the file, for a truncated or
  // replaced file, a bad header or a checksum mismatch.
  absl::StatusOr<std::span<const float>> Read(const ParamRecord& param, const ChunkRecord& chunk);

 private:
  DataFiles files_;
  std::vector<float> values_;
};

}  // namespace zero::checkpoint
