// Byte sizes: rounding, readable printing, and parsing of "16GiB"/"80GB".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zero {

inline constexpr size_t kKiB = size_t{1} << 10;
inline constexpr size_t kMiB = size_t{1} << 20;
inline constexpr size_t kGiB = size_t{1} << 30;

constexpr bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
// `align` must be a power of two.
constexpr size_t AlignUp(size_t x, size_t align) { return (x + align - 1) & ~(align - 1); }
constexpr size_t AlignDown(size_t x, size_t align) { return x & ~(align - 1); }
// Any positive `multiple` (e.g. ranks x 16 elements with 3 or 6 ranks).
constexpr size_t RoundUp(size_t x, size_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// "1.50 GiB", "512 B": binary units, for logs and error messages.
std::string FormatBytes(size_t bytes);

// Accepts a number with an optional unit: B, KB, MB, GB, TB (powers of 1000)
// or KiB, MiB, GiB, TiB (powers of 1024). "16GiB", "80GB", "4096".
absl::StatusOr<size_t> ParseBytes(std::string_view text);

}  // namespace zero
