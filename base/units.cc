#include "base/units.h"

#include <cctype>
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
    // 2^64 as a double: converting anything at or above it is undefined.
    if (value * scale >= 18446744073709551616.0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s' is more bytes than 64 bits hold", std::string(text)));
    }
    return static_cast<size_t>(value * scale);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("'%s': unknown unit '%s' (use B, KB, MB, GB, KiB, MiB, GiB)",
                      std::string(text), suffix));
}

}  // namespace zero
