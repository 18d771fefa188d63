#include "zero/checkpoint/internal/data_file.h"

#include <cstring>

#include "absl/strings/str_format.h"
#include "base/fingerprint.h"

namespace zero::checkpoint {
namespace {

constexpr char kMagic[8] = {'Z', 'E', 'R', 'O', 'C', 'K', 'P', 'T'};

}  // namespace

std::string EncodeDataHeader(const DataFileHeader& header) {
  std::string bytes(kDataHeaderBytes, '\0');
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, &header.version, 4);
  std::memcpy(bytes.data() + 12, &header.rank, 4);
  std::memcpy(bytes.data() + 16, &header.world_size, 4);
  std::memcpy(bytes.data() + 24, &header.model_fingerprint, 8);
  return bytes;
}

absl::StatusOr<DataFileHeader> DecodeDataHeader(std::string_view bytes, const std::string& path) {
  if (bytes.size() != kDataHeaderBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return absl::DataLossError(
        absl::StrFormat("'%s' is not a zero checkpoint data file (bad header)", path));
  }
  DataFileHeader header;
  std::memcpy(&header.version, bytes.data() + 8, 4);
  std::memcpy(&header.rank, bytes.data() + 12, 4);
  std::memcpy(&header.world_size, bytes.data() + 16, 4);
  std::memcpy(&header.model_fingerprint, bytes.data() + 24, 8);
  if (header.version != kFormatVersion) {
    return absl::DataLossError(absl::StrFormat("'%s' has format version %d; this build reads %d",
                                               path, header.version, kFormatVersion));
  }
  return header;
}

std::string DataFileName(int rank, int world_size) {
  return absl::StrFormat("rank-%05d-of-%05d.bin", rank, world_size);
}

uint64_t MixParam(uint64_t h, std::string_view name, uint64_t numel) {
  const uint64_t length = name.size();  // so that ("ab", n) and ("a", ...) never collide
  h = Fnv1a(&length, sizeof length, h);
  h = Fnv1a(name.data(), name.size(), h);
  return Fnv1a(&numel, sizeof numel, h);
}

uint64_t ModelFingerprint(const Layout& layout) {
  uint64_t h = kFnvBasis;
  for (const ParamSlot& p : layout.params()) h = MixParam(h, p.name, p.numel);
  return h;
}

}  // namespace zero::checkpoint
