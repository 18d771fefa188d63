// The error of a failed mapping call (mmap, mprotect, madvise, munmap,
// fallocate) on [addr, addr+bytes), with errno's text: what the host
// backend and the node range report alike.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/units.h"

namespace zero::internal {

inline absl::Status MappingError(std::string_view call, uintptr_t addr, size_t bytes) {
  return absl::InternalError(absl::StrFormat("%s(%#x, %s) failed: %s", call, addr,
                                             FormatBytes(bytes), std::strerror(errno)));
}

}  // namespace zero::internal
