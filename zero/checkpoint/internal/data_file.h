// A rank's data file: a 32-byte header, then raw little-endian fp32 chunks
// (chunk_plan.h) with no framing: where each chunk lies and its CRC-32C are
// in the manifest. The header lets a reader tell a data file from another
// file and catch a part file from another model or another world size
// (e.g. copied in by hand) before trusting any chunk.
//
//   bytes 0-7   "ZEROCKPT"
//   8-11        format version (1), little-endian u32
//   12-15       rank that wrote it
//   16-19       world size at save
//   20-23       zero
//   24-31       model fingerprint (ModelFingerprint), u64
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "zero/layout.h"

namespace zero::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian and written with memcpy");

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kDataHeaderBytes = 32;

struct DataFileHeader {
  uint32_t version = kFormatVersion;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  uint64_t model_fingerprint = 0;
};

std::string EncodeDataHeader(const DataFileHeader& header);
// DataLoss naming `path` for a wrong magic, version or size.
absl::StatusOr<DataFileHeader> DecodeDataHeader(std::string_view bytes, const std::string& path);

// "rank-00003-of-00008.bin".
std::string DataFileName(int rank, int world_size);

// FNV-1a over parameter names and element counts, in registration order:
// what identifies the model whatever the world size, bucket size or stage.
// Start from kFnvBasis and mix every parameter in order.
uint64_t MixParam(uint64_t h, std::string_view name, uint64_t numel);
uint64_t ModelFingerprint(const Layout& layout);

}  // namespace zero::checkpoint
