// Files that are either wholly written or not there: readers never see half.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace zero {

// Writes `contents` to `path` through a temporary file of its own in the
// same folder, fsync, rename and fsync of the folder. On error the old file,
// if any, is untouched. Thread-safe, also for one path. Errors carry the
// system's reason as their code (ENOSPC: ResourceExhausted).
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

}  // namespace zero
