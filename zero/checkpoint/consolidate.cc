#include "zero/checkpoint/consolidate.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/checkpoint_dir.h"
#include "zero/checkpoint/internal/file_io.h"
#include "zero/checkpoint/internal/manifest.h"
#include "zero/checkpoint/internal/verified_reader.h"

namespace zero::checkpoint {
namespace {

// safetensors keeps its own entry under this name; a parameter so named
// would be a second key of one JSON object, which readers take either way.
constexpr char kMetadataKey[] = "__metadata__";

absl::Status CheckNames(const Manifest& m, const std::string& checkpoint) {
  for (const ParamRecord& p : m.params) {
    if (p.name == kMetadataKey) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint '", checkpoint, "' has a parameter named '", kMetadataKey,
          "', the key safetensors reserves for its metadata: rename it to consolidate"));
    }
  }
  return absl::OkStatus();
}

std::string SafetensorsHeader(const Manifest& m) {
  std::string header = absl::StrFormat(
      "{\"%s\":{\"format\":\"pt\",\"source\":\"zero-checkpoint\",\"steps\":\"%d\"}",
      kMetadataKey, m.steps);
  uint64_t offset = 0;
  for (const ParamRecord& p : m.params) {
    const uint64_t bytes = p.numel * sizeof(float);
    absl::StrAppendFormat(&header,
                          ",%s:{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%d,%d]}",
                          json::Quote(p.name), p.numel, offset, offset + bytes);
    offset += bytes;
  }
  header += "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');  // keeps the tensors 8-byte aligned
  return header;
}

// The master chunks of `p` (sorted, and tiling [0, numel)).
absl::Status CopyMaster(VerifiedReader& reader, const ParamRecord& p, AtomicFileWriter& out) {
  for (const ChunkRecord& c : p.chunks) {
    if (c.buffer != 0) break;
    ASSIGN_OR_RETURN(std::span<const float> values, reader.Read(p, c));
    RETURN_IF_ERROR(out.Append(values.data(), values.size_bytes()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConsolidateSummary> ConsolidateToSafetensors(const std::string& checkpoint,
                                                            const std::string& output) {
  ConsolidateSummary summary;
  ASSIGN_OR_RETURN(summary.checkpoint, ResolveCheckpoint(checkpoint));
  const std::string manifest_path = absl::StrCat(summary.checkpoint, "/", kManifestName);
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(manifest_path));
  ASSIGN_OR_RETURN(Manifest manifest, ParseManifest(text, manifest_path));
  RETURN_IF_ERROR(CheckNames(manifest, summary.checkpoint));
  const std::string header = SafetensorsHeader(manifest);
  const uint64_t length = header.size();
  ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::Open(output));
  RETURN_IF_ERROR(out.Append(&length, sizeof length));
  RETURN_IF_ERROR(out.Append(header.data(), header.size()));
  VerifiedReader reader(summary.checkpoint, manifest);
  for (const ParamRecord& p : manifest.params) {
    RETURN_IF_ERROR(CopyMaster(reader, p, out));
    summary.elements += p.numel;
  }
  RETURN_IF_ERROR(out.Commit());
  summary.params = static_cast<int>(manifest.params.size());
  summary.steps = manifest.steps;
  return summary;
}

}  // namespace zero::checkpoint
