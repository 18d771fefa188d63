#include "zero/checkpoint/internal/verified_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/crc32c.h"
#include "zero/checkpoint/internal/data_file.h"

namespace zero::checkpoint {

VerifiedReader::VerifiedReader(std::string folder, const Manifest& manifest)
    : folder_(std::move(folder)), manifest_(manifest), files_(manifest.files.size()) {}

absl::Status VerifiedReader::CheckFile(const RandomAccessFile& file, int index) const {
  const FileRecord& record = manifest_.files[index];
  if (file.size() != record.bytes) {
    return absl::DataLossError(
        absl::StrFormat("'%s' is %d bytes, the manifest says %d: truncated or replaced",
                        file.path(), file.size(), record.bytes));
  }
  std::string bytes(kDataHeaderBytes, '\0');
  RETURN_IF_ERROR(file.ReadAt(0, bytes.data(), bytes.size()));
  ASSIGN_OR_RETURN(DataFileHeader header, DecodeDataHeader(bytes, file.path()));
  if (header.rank != static_cast<uint32_t>(index) ||
      header.world_size != static_cast<uint32_t>(manifest_.world_size)) {
    return absl::DataLossError(
        absl::StrFormat("'%s' was written by rank %d of %d; the manifest expects rank %d of %d",
                        file.path(), header.rank, header.world_size, index, manifest_.world_size));
  }
  if (header.model_fingerprint != manifest_.Fingerprint()) {
    return absl::DataLossError(
        absl::StrFormat("'%s' holds another model than its manifest describes", file.path()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const RandomAccessFile*> VerifiedReader::File(int index) {
  if (!files_[index]) {
    const std::string path = absl::StrCat(folder_, "/", manifest_.files[index].name);
    ASSIGN_OR_RETURN(RandomAccessFile file, RandomAccessFile::Open(path));
    RETURN_IF_ERROR(CheckFile(file, index));
    files_[index].emplace(std::move(file));
  }
  return &*files_[index];
}

absl::StatusOr<std::span<const float>> VerifiedReader::Read(const ParamRecord& param,
                                                            const ChunkRecord& chunk) {
  ASSIGN_OR_RETURN(const RandomAccessFile* file, File(chunk.file));
  values_.resize(chunk.end - chunk.begin);
  const size_t bytes = values_.size() * sizeof(float);
  RETURN_IF_ERROR(file->ReadAt(chunk.offset, values_.data(), bytes));
  const uint32_t crc = Crc32c(values_.data(), bytes);
  if (crc != chunk.crc32c) {
    return absl::DataLossError(absl::StrFormat(
        "'%s': the chunk of '%s' (%s, elements [%d, %d)) at byte %d fails its checksum "
        "(crc32c %08x, the manifest says %08x): corrupted",
        file->path(), param.name, BufferName(chunk.buffer), chunk.begin, chunk.end, chunk.offset,
        crc, chunk.crc32c));
  }
  return std::span<const float>(values_);
}

}  // namespace zero::checkpoint
