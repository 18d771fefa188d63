// CRC-32C (Castagnoli, the iSCSI / ext4 / safetensors-tooling checksum):
// Debian 12's abseil predates absl::crc32c, so we carry our own (checkpoints,
// the NVMe tier). Uses the SSE4.2 crc32 instruction when the CPU has it, in three
// interleaved lanes (about 3x one dependent chain, 30x the tables), else
// slicing-by-8 tables; all give the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zero {

// The CRC of `crc`'s data followed by `bytes` more bytes: Crc32cExtend(0,
// ab) == Crc32cExtend(Crc32cExtend(0, a), b). Standard pre- and
// post-inversion: Crc32c("123456789") == 0xE3069283.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t bytes);

inline uint32_t Crc32c(const void* data, size_t bytes) { return Crc32cExtend(0, data, bytes); }
inline uint32_t Crc32c(std::string_view s) { return Crc32c(s.data(), s.size()); }

// The CRC of a followed by b from Crc32c(a), Crc32c(b) and b's length, in
// O(log) time without the data: a file's CRC from its chunks' CRCs.
uint32_t Crc32cCombine(uint32_t first, uint32_t second, size_t second_bytes);

// The table path alone, so tests can check it against the instruction.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t bytes);

}  // namespace zero
