// Files that are either wholly written or not there: readers never see half.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace zero {

// Writes `contents` to `path` through a temporary file in the same folder,
// fsync and rename. On error the old file, if any, is untouched.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace zero
