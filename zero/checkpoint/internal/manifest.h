// The manifest: what a checkpoint holds and where every byte of it lies.
// Rank 0 writes it (atomically) only after every rank's data file is in
// place, so a folder with a manifest is a complete checkpoint.
//
// One header line, then exactly `bytes` bytes of JSON with that CRC-32C:
//
//   zero-checkpoint-manifest v1 crc32c=1c2d3e4f bytes=2345
//   {"format": "zero-checkpoint", "version": 1,
//    "model_fingerprint": "9f0e...",            (data_file.h: names + numels)
//    "param_dtype": "bf16", "optimizer": {"name": "adamw", "state_buffers": 2},
//    "buffers": ["master", "state0", "state1"],
//    "steps": 10, "loss_scaler": null or {"scale", "good_steps", "hysteresis_left"},
//    "saved_by": {"world_size": 4, "stage": 2}, "chunk_elements": 1048576,
//    "files": [{"name": "rank-00000-of-00004.bin", "bytes": 4128, "crc32c": 123}, ...],
//    "params": [{"name": "fc1.weight", "numel": 512, "chunks": [
//        {"buffer": 0, "begin": 0, "end": 128, "file": 0, "offset": 32, "crc32c": 99}, ...]}]}
//
// The world size is recorded but is not part of the model's identity: the
// (parameter, element range) addressing loads into any number of ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "optimizers/loss_scaler.h"
#include "zero/layout.h"

namespace zero::checkpoint {

inline constexpr char kManifestName[] = "manifest";

// "master" for buffer 0, "state<i>" for optimizer state i (buffer 1 + i).
std::string BufferName(int buffer);

struct ChunkRecord {
  int buffer;           // 0: fp32 master weights; 1 + i: optimizer state i
  uint64_t begin, end;  // parameter elements
  int file;             // index into Manifest::files
  uint64_t offset;      // byte offset of the data in that file
  uint32_t crc32c;      // of the data
};

struct ParamRecord {
  std::string name;
  uint64_t numel = 0;
  // Sorted by (buffer, begin); per buffer they tile [0, numel) exactly.
  std::vector<ChunkRecord> chunks;
};

struct FileRecord {
  std::string name;  // relative to the checkpoint folder
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

struct Manifest {
  std::string optimizer;
  int state_buffers = 0;
  DType param_dtype = DType::kF32;
  int64_t steps = 0;
  std::optional<LossScaler::State> loss_scaler;
  int world_size = 1;  // at save
  int stage = 0;       // at save; informational
  uint64_t chunk_elements = 0;
  std::vector<FileRecord> files;    // one per saving rank, in rank order
  std::vector<ParamRecord> params;  // registration order

  int buffers() const { return 1 + state_buffers; }
  uint64_t Fingerprint() const;  // ModelFingerprint of params
};

// The header line and the JSON. Sorts each parameter's chunks.
std::string SerializeManifest(Manifest manifest);

// Checks the header, the checksum, the structure and that the chunks tile
// every buffer of every parameter inside the recorded file sizes. Errors
// name `path`: DataLoss for a truncated or corrupted file, InvalidArgument
// for a well-formed one that breaks the rules above.
absl::StatusOr<Manifest> ParseManifest(std::string_view text, const std::string& path);

// FailedPrecondition, naming the first difference, unless the checkpoint
// holds this model (same names and element counts in the same order) and
// this optimizer (same name and number of state buffers).
absl::Status CheckMatches(const Manifest& manifest, const Layout& layout,
                          std::string_view optimizer, int state_buffers, const std::string& path);

}  // namespace zero::checkpoint
