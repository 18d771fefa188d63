#include "zero/checkpoint/internal/verified_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/crc32c.h"
#include "base/status_macros.h"
#include "zero/checkpoint/internal/data_file.h"

namespace zero::checkpoint {

absl::Status CheckDataFile(const Manifest& manifest, int index, uint64_t size,
                           std::string_view header_bytes, const std::string& path) {
  const FileRecord& record = manifest.files[index];
  if (size != record.bytes) {
    return absl::DataLossError(absl::StrFormat(
        "'%s' is %d bytes, the manifest says %d: truncated or replaced", path, size, record.bytes));
  }
  ASSIGN_OR_RETURN(DataFileHeader header, DecodeDataHeader(header_bytes, path));
  if (header.rank != static_cast<uint32_t>(index) ||
      header.world_size != static_cast<uint32_t>(manifest.world_size)) {
    return absl::DataLossError(
        absl::StrFormat("'%s' was written by rank %d of %d; the manifest expects rank %d of %d",
                        path, header.rank, header.world_size, index, manifest.world_size));
  }
  if (header.model_fingerprint != manifest.Fingerprint()) {
    return absl::DataLossError(
        absl::StrFormat("'%s' holds another model than its manifest describes", path));
  }
  return absl::OkStatus();
}

absl::Status CheckChunk(const std::string& path, const ParamRecord& param, const ChunkRecord& chunk,
                        const void* data) {
  const uint32_t crc = Crc32c(data, (chunk.end - chunk.begin) * sizeof(float));
  if (crc == chunk.crc32c) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "'%s': the chunk of '%s' (%s, elements [%d, %d)) at byte %d fails its checksum "
      "(crc32c %08x, the manifest says %08x): corrupted",
      path, param.name, BufferName(chunk.buffer), chunk.begin, chunk.end, chunk.offset, crc,
      chunk.crc32c));
}

VerifiedReader::VerifiedReader(std::string folder, const Manifest& manifest)
    : files_(std::move(folder), manifest) {}

absl::StatusOr<std::span<const float>> VerifiedReader::Read(const ParamRecord& param,
                                                            const ChunkRecord& chunk) {
  ASSIGN_OR_RETURN(std::shared_ptr<DirectFile> file, files_.Get(chunk.file));
  values_.resize(chunk.end - chunk.begin);
  RETURN_IF_ERROR(file->ReadAt(chunk.offset, values_.data(), values_.size() * sizeof(float)));
  RETURN_IF_ERROR(CheckChunk(file->path(), param, chunk, values_.data()));
  return std::span<const float>(values_);
}

}  // namespace zero::checkpoint
