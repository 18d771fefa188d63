#include "base/units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace zero {

std::string FormatBytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKiB) return absl::StrFormat("%d B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

absl::StatusOr<size_t> ParseBytes(std::string_view text) {
  static constexpr std::pair<const char*, double> kSuffixes[] = {
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0},
      {"tib", 1099511627776.0}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
      {"tb", 1e12}, {"b", 1.0}, {"", 1.0}};
  std::string lower = absl::AsciiStrToLower(std::string(text));
  size_t digits = 0;
  while (digits < lower.size() &&
         (std::isdigit(static_cast<unsigned char>(lower[digits])) || lower[digits] == '.')) {
    ++digits;
  }
  std::string number = lower.substr(0, digits);
  std::string suffix = lower.substr(digits);
  char* end = nullptr;
  double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || value < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' is not a byte size", std::string(text)));
  }
  for (const auto& [name, scale] : kSuffixes) {
    if (suffix != name) continue;
    const double bytes = value * scale;
    // 2^64 as a double: converting anything at or above it is undefined.
    if (bytes >= 18446744073709551616.0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s' is more bytes than 64 bits hold", std::string(text)));
    }
    // Rounded to the nearest byte ("4.35GB" is 4.35e9, not one byte less),
    // but a fraction of a byte is a mistake, not a size ("1.5" was 1).
    const double whole = std::nearbyint(bytes);
    if (std::fabs(bytes - whole) > 1e-6 * std::max(1.0, bytes)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s' is not a whole number of bytes", std::string(text)));
    }
    return static_cast<size_t>(whole);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("'%s': unknown unit '%s' (use B, KB, MB, GB, KiB, MiB, GiB)",
                      std::string(text), suffix));
}

}  // namespace zero
